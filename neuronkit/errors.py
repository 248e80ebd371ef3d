"""Errors neuronkit raises for bad input: one clear line for the user, nothing lost."""


class NeuronkitInputError(ValueError):
    """Bad user input (missing or corrupt checkpoint, unknown architecture, wrong parameter type).

    The CLI prints its message on one line and exits with status 2.
    """
