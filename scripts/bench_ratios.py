"""Prints, for every BM_X/arg in Google Benchmark JSON files, its throughput as a
ratio of BM_XBaseline/arg (busbw, bytes_per_second, or items_per_second). With
repetitions, the medians are compared.

A binary run under several settings writes one file per setting, named
NAME@SETTING.json (scripts/bench: infeed_transfer@single_copy=none.json and
infeed_transfer@single_copy=cma.json). Those files form one group: BM_X's best
median over the settings is compared with BM_XBaseline's best median over the
settings (each may come from a different setting), so the baseline is the
fastest plain MPI the machine offers; every setting's pair is printed too.
A benchmark without a baseline (BM_PlainMpiQueue, a reference) prints its best
rate and setting.

A benchmark and its baseline are paired by their arguments alone: the segments
Google Benchmark appends for run options (iterations:3, repeats:5, threads:2,
manual_time, real_time, process_time) may differ between the two, as they do for
BM_InProcessHop/262144/iterations:3/manual_time and BM_InProcessHopBaseline/262144."""
import json
import pathlib
import sys
from collections import defaultdict


def rate(b):
    for key in ("busbw", "bytes_per_second", "items_per_second"):
        if key in b:
            return key, float(b[key])
    return None, None


def medians(path):
    """name -> the median of each benchmark that ran repeatedly, else its one run."""
    runs = {}
    for b in json.loads(path.read_text())["benchmarks"]:
        name = b["run_name"] if "run_name" in b else b["name"]
        if b.get("aggregate_name") == "median" or (
                b.get("run_type") != "aggregate" and name not in runs):
            runs[name] = b
    return runs


OPTION_SEGMENTS = ("manual_time", "real_time", "process_time")


def pairing_key(name):
    """(family, arguments) of a run name: BM_X/1024/iterations:3/manual_time gives
    ("BM_X", ("1024",)); a baseline's family keeps its "Baseline" suffix."""
    family, *segments = name.split("/")
    args = tuple(s for s in segments if ":" not in s and s not in OPTION_SEGMENTS)
    return family, args


def baseline_of(name, names):
    """The baseline run paired with `name` among `names`, or None."""
    family, args = pairing_key(name)
    for candidate in names:
        if pairing_key(candidate) == (family + "Baseline", args):
            return candidate
    return None


def best(runs_by_setting, name):
    """(rate key, best rate, its setting, its entry) of `name` over the settings."""
    found = []
    for setting, runs in runs_by_setting.items():
        if name in runs:
            key, value = rate(runs[name])
            if value is not None:
                found.append((value, key, setting, runs[name]))
    if not found:
        return None, None, None, None
    value, key, setting, entry = max(found, key=lambda f: f[0])
    return key, value, setting, entry


def rate_text(key, value):
    """A rate as an unpaired line prints it; nothing without one."""
    if value is None:
        return ""
    if key == "items_per_second":
        return f"{value:10.2f} /s  "
    return f"{key:16s} {value / 1e9:8.2f} GB/s  "


def print_group(stem, runs_by_setting):
    several = list(runs_by_setting) != [""]
    print(f"-- {stem}" + (f" (best of {', '.join(runs_by_setting)})" if several else ""))
    names = dict.fromkeys(n for runs in runs_by_setting.values() for n in runs)
    for name in names:
        if pairing_key(name)[0].endswith("Baseline"):
            continue
        ref_name = baseline_of(name, names)
        if ref_name is None:
            key, value, setting, _ = best(runs_by_setting, name)
            print(f"{name:45s} {rate_text(key, value)}no baseline with the same arguments"
                  + (f"  [{setting}]" if several and value is not None else ""))
            continue
        key, value, setting, entry = best(runs_by_setting, name)
        _, ref_value, ref_setting, _ = best(runs_by_setting, ref_name)
        if value is None or ref_value is None:
            continue
        if key == "items_per_second":
            line = (f"{name:45s} {entry.get('label', ''):10s} {value:10.2f} /s  baseline "
                    f"{ref_value:10.2f} /s  ratio {value / ref_value:6.3f}")
        else:
            line = (f"{name:45s} {key:16s} {value / 1e9:8.2f} GB/s  baseline "
                    f"{ref_value / 1e9:8.2f} GB/s  ratio {value / ref_value:5.2f}")
        if several:
            line += f"  [{setting} vs {ref_setting}]  " + "  ".join(
                f"{s}: {rate(r[name])[1] / 1e9:.2f}/{rate(r[ref_name])[1] / 1e9:.2f}"
                for s, r in runs_by_setting.items() if name in r and ref_name in r)
        print(line)


def main(outdir):
    groups = defaultdict(dict)
    for path in sorted(pathlib.Path(outdir).glob("*.json")):
        stem, _, setting = path.stem.partition("@")
        groups[stem][setting] = medians(path)
    for stem, runs_by_setting in groups.items():
        print_group(stem, runs_by_setting)


if __name__ == "__main__":
    main(sys.argv[1])
