"""Typed errors raised by the engine. The CLI maps them once to exit codes."""


class OmniVoiceError(Exception):
    """Base class: a runtime failure (exit code 1)."""


class InvalidRequest(OmniVoiceError, ValueError):
    """A request's value is outside what is allowed (a usage error, exit code 2)."""


class CheckpointError(OmniVoiceError):
    """The checkpoint is missing, incomplete, corrupt, or contradicts the engine."""


class ModelUnavailable(OmniVoiceError):
    """The checkpoint is not cached and cannot be downloaded (offline)."""
