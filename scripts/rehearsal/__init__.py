"""A rehearsal of the recipe's build scripts against ONNX Runtime's real source (scripts/rehearse.py), and
the stand-in channel of conda-forge's packages (channel.py)."""


class RehearsalError(Exception):
    """A problem with the rehearsal's inputs, said in one line."""
