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
