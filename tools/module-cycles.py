#!/usr/bin/env python3
# Prints every cycle among clowder's top-level modules (crate::TOP references under src/).
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
REF = re.compile(r"\bcrate::([A-Za-z_][A-Za-z0-9_]*)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


def owner(rel):
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def production(text):
    """The text without `#[cfg(test)] mod … { … }` blocks (rustfmt closes them with `}` in column 0)."""
    kept, skipping, lines = [], False, text.split("\n")
    for i, line in enumerate(lines):
        if skipping:
            skipping = line != "}"
        elif line == "#[cfg(test)]" and i + 1 < len(lines) and lines[i + 1].startswith("mod "):
            skipping = lines[i + 1].endswith("{")
        else:
            kept.append(line)
    return "\n".join(kept)


def graph(src):
    edges = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            own = owner(os.path.relpath(path, src))
            if own in ("main", "lib"):
                continue
            if name == "tests.rs":
                continue
            text = production(open(path, encoding="utf-8").read())
            refs = set(REF.findall(text))
            for group in GROUP.findall(text):
                refs.update(p.strip().split("::")[0] for p in group.split(",") if p.strip())
            edges.setdefault(own, set()).update(r for r in refs if r != own)
    return edges


def cycles(edges):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def main():
    edges = graph(SRC)
    found = cycles(edges)
    for comp in found:
        inner = [f"{a}->{b}" for a in comp for b in sorted(edges.get(a, ())) if b in comp]
        print(f"cycle: {' '.join(comp)}   ({', '.join(inner)})")
    if not found:
        print("no module cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
