"""Integrations that make third-party clients see the `neuron` device with no change to the user's code,
installed by the device's autoload when the client is imported (Lightning: `neuronkit.clients.lightning`)."""
