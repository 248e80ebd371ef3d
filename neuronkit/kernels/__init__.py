"""The notebooks' process runtime: how each notebook's Jupyter kernel starts (`starter`: one notebook ahead,
forked or fresh), the fork server that imports the libraries once and forks a kernel per notebook
(`fork_server`), and the command its kernelspec runs (`launcher`, standard library only). Nothing here imports
torch: `neuronkit run` starts the fork server before it imports torch itself."""
