"""The one error type audit, replay, report and tail raise for bad input."""


class AuditError(RuntimeError):
    """Bad input or an unverifiable log; the message is one line naming the problem."""
