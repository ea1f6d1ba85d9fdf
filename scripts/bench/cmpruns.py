#!/usr/bin/env python3
"""Set saved runs of scripts/bench/bench.py (`--save`) of two builds side by side.

    python3 scripts/bench/cmpruns.py --a OLD.json [OLD2.json ...] --b NEW.json [NEW2.json ...]

Prints a Markdown table: each row's ratio in every run of A and of B, and the median of B's
over the median of A's (a ratio's direction is the row's own: see its measurement). Rows are
matched by section and measurement with the run's figures left out. Then the counts each row
names (requests, block decodes, O_DIRECT reads, LISTs, GETs) where A and B differ: counts do
not depend on the machine's load, so a difference there is a change of behaviour, or a count
that varies between runs of one build (compare A's runs with each other).
"""

import argparse
import json
import re
import statistics

COUNT = re.compile(r"(\d[\d.]*) (requests?[a-z ]*?(?= |\)|,|;|$)|block decodes of \d+|"
                   r"of \d+ block reads O_DIRECT|LISTs|GETs)")


def key(r):
    m = re.sub(r"\([^()]*\)", "", r["measurement"])
    m = re.sub(r"\d[\d.,]*", "#", m)
    return r["section"], " ".join(m.split())


def load(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for r in json.load(f)["rows"]:
                label = " ".join(re.sub(r"\([^()]*\)", "", r["measurement"]).split())
                e = rows.setdefault(key(r), {"ratios": [], "counts": [], "label": label})
                if r["ratio"] is not None:
                    e["ratios"].append(r["ratio"])
                e["counts"].append(sorted(set(COUNT.findall(r["measurement"]))))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", nargs="+", required=True, help="runs of build A (before)")
    ap.add_argument("--b", nargs="+", required=True, help="runs of build B (after)")
    a, b = (load(x) for x in ap.parse_args().__dict__.values())
    print("| section | row | A's ratios | B's ratios | B/A (medians) |")
    print("|---|---|---|---|---|")
    for k, ea in a.items():
        eb = b.get(k)
        if not eb or not ea["ratios"] or not eb["ratios"]:
            continue
        ma, mb = statistics.median(ea["ratios"]), statistics.median(eb["ratios"])
        q = f"{mb / ma:.2f}" if ma else "-"
        fa = ", ".join(f"{x:.2f}" for x in ea["ratios"])
        fb = ", ".join(f"{x:.2f}" for x in eb["ratios"])
        print(f"| {k[0]} | {ea['label'][:90]} | {fa} | {fb} | {q} |")
    print()
    print("Counts that differ (each run's, A then B):")
    for k, ea in a.items():
        eb = b.get(k)
        if eb and ea["counts"] != eb["counts"]:
            show = lambda cs: " / ".join(", ".join(f"{n} {w}" for n, w in c) for c in cs)
            print(f"- {k[0]}: {ea['label'][:80]}\n  A: {show(ea['counts'])}\n  B: {show(eb['counts'])}")


if __name__ == "__main__":
    main()
