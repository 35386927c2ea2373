"""Whether a law serves an adapter, engine and kernel alike: the one "not applicable" rule.

A law declares what it needs (observables for an engine adapter, components for a kernel
adapter); an adapter declares what it offers and, for what it lacks, why (`why_not`). A law
the adapter cannot serve is reported as "not applicable: needs X (why)", never as passed."""
from __future__ import annotations


def not_applicable(needs, offered, why_not: dict, *, any_of: bool = False) -> str | None:
    """None when the law runs: every need offered, or (`any_of`: a law drawing only the
    components the adapter has) at least one; else the line naming what is missing."""
    offered = set(offered)
    if (needs & offered) if any_of else needs <= offered:
        return None
    gone = sorted(needs if any_of else needs - offered, key=lambda n: n.value)
    why = "; ".join(f"{n.value}: {why_not[n]}" for n in gone if n in why_not)
    return (f"not applicable: needs {', '.join(n.value for n in gone)}"
            + (f" ({why})" if why else ""))
