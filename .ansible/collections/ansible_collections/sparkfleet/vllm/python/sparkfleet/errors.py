"""Errors the planner raises for input it refuses: each names the variable and what would work."""

from __future__ import annotations


class PlanError(ValueError):
    """Intent, facts or profile that cannot produce a safe plan."""

    def __init__(self, variable: str, problem: str, suggestions: tuple[str, ...] = ()) -> None:
        self.variable = variable
        self.problem = problem
        self.suggestions = suggestions
        text = f"{variable}: {problem}"
        if suggestions:
            text += "; try " + ", or ".join(suggestions)
        super().__init__(text)


class InfeasibleError(PlanError):
    """The intent does not fit the memory this host or cluster has."""


def from_validation(
    exc: Exception, prefix: str, sep: str = "_", suggestions: tuple[str, ...] = (), whole: str = ""
) -> PlanError:
    """The first pydantic error as a PlanError naming the role variable (prefix + sep + field path).

    An error about the input as a whole (no field) names prefix + sep + whole, or the prefix alone.
    Suggestions are offered only for unknown keys.
    """
    errors: list[dict[str, object]] = list(getattr(exc, "errors", list)())
    if not errors:
        return PlanError(prefix, str(exc), suggestions)
    first = errors[0]
    loc = list(first["loc"]) if isinstance(first["loc"], (list, tuple)) else []
    loc = loc or ([whole] if whole else [])
    field = "".join(
        f"[{part}]" if isinstance(part, int) else (f"{sep}{part}" if i == 0 else f".{part}") for i, part in enumerate(loc)
    )
    extra = first.get("type") == "extra_forbidden"
    return PlanError(f"{prefix}{field}", str(first["msg"]).removeprefix("Value error, "), suggestions if extra else ())
