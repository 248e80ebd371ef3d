"""Stage 00, environment: which `neuron` device this process has, what the model is (from its config
alone), and the run's parameters. Running it starts a run: it writes params.json and clears older records."""
