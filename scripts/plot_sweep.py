#!/usr/bin/python3
"""Plots of a `tpusim sweep` or `tpusim capacity` output directory (matplotlib).

Usage: scripts/plot_sweep.py DIR [--target-au 0.9] [--au measured|projected] [--answer VALUE]
                             [--order A,B,C]

DIR/runs.csv (tpusim sweep) gives:
  throughput.png  total examples/s against the first varied key, one line per value
                  of the other varied keys
  au.png          accelerator utilization (--au measured: worst core solid, mean
                  dashed; --au projected: projected_au, on the target pod's hosts)
                  against the first varied key, with the target line
  breakdown.png   one stacked bar per run: the mean step split into its parts (ms)
DIR/capacity.csv (tpusim capacity) gives:
  capacity.png    AU (--au: the worst core's measured, or the projected) of every run
                  tried against the key, passing runs green, failing red, the target
                  line and the answer

Every title says whose figures a plot shows: "measured on this machine" (the runs'
own rates, AU and step parts: this machine's CPUs playing many hosts, noise
included) or "projected for the pod" (pod_projection, on the target pod's hosts).

`tpusim sweep` and `tpusim capacity` call this with /usr/bin/python3 at their end.
For each file written it prints one line: path, size in pixels, distinct colors,
and the plot's title.
Exit 3 when matplotlib is missing (Debian: python3-matplotlib, python3-numpy).
"""
import argparse
import csv
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image
    import matplotlib.pyplot as plt
    import numpy as np
except ImportError as e:
    print(f"plot_sweep: {e}: install python3-matplotlib and python3-numpy (scripts/install-deps), "
          "then run scripts/plot_sweep.py DIR", file=sys.stderr)
    sys.exit(3)

# The parts of runs.csv's step breakdown that add up to step_ms (crs_sync_ms is inside crs_ms).
PARTS = ["infeed", "compute", "crs", "apply", "device", "outfeed", "post_loop",
         "embedding_forward", "embedding_backward", "idle"]


def read_csv(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    keys = header[1:header.index("exit_code")]
    return keys, rows


# The column each --au reads: the worst core's measured AU, or pod_projection's.
AU_COLUMN = {"measured": "au_min", "projected": "projected_au"}

# Whose figures a plot shows, as its title says (every title ends with one).
BASIS = {"measured": "measured on this machine", "projected": "projected for the pod"}


def succeeded(row, au="measured"):
    return row["exit_code"] == "0" and row.get(AU_COLUMN[au], "") != ""


def as_numbers(values):
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def x_axis(values, order=None):
    """Positions for the key's values: the numbers themselves, or indices in order."""
    numbers = as_numbers(values)
    if numbers is not None:
        return numbers, None
    order = order or list(dict.fromkeys(values))
    return [order.index(v) for v in values], order


def series(keys, rows):
    """Rows grouped by the values of every key but the first, in first-seen order."""
    groups = {}
    for row in rows:
        label = ", ".join(f"{k}={row[k]}" for k in keys[1:])
        groups.setdefault(label, []).append(row)
    return groups


def save(fig, path):
    title = fig.axes[0].get_title()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    img = matplotlib.image.imread(path)
    colors = len(np.unique(img.reshape(-1, img.shape[2]), axis=0))
    print(f"plot_sweep: wrote {path} ({img.shape[1]}x{img.shape[0]} px, {colors} colors): {title}")


def line_plot(out_dir, keys, rows, name, columns, ylabel, title, target=None, au="measured"):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ok = [r for r in rows if succeeded(r, au)]
    all_x, order = x_axis([r[keys[0]] for r in ok])
    for i, (label, group) in enumerate(series(keys, ok).items()):
        xs, _ = x_axis([r[keys[0]] for r in group], order)
        color = f"C{i}"
        for column, style in columns:
            ys = [float(r[column]) for r in group]
            pairs = sorted(zip(xs, ys))
            ax.plot([p[0] for p in pairs], [p[1] for p in pairs], style, color=color, marker="o",
                    label=f"{label or 'runs'} ({column})" if len(columns) > 1 else (label or "runs"))
    if target is not None:
        ax.axhline(target, color="black", linestyle=":", label=f"target {target}")
    if order:
        ax.set_xticks(range(len(order)), order)
    ax.set_xlabel(keys[0])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, os.path.join(out_dir, name))


def breakdown_plot(out_dir, keys, rows):
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(rows) + 3), 4.5))
    labels = [r["run"] + "\n" + "\n".join(r[k] for k in keys) for r in rows]
    bottom = np.zeros(len(rows))
    for i, part in enumerate(PARTS):
        values = np.array([float(r[part + "_ms"]) if r[part + "_ms"] else 0.0 for r in rows])
        if not values.any():
            continue
        ax.bar(range(len(rows)), values, bottom=bottom, label=part, color=f"C{i}")
        bottom += values
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("mean step (ms)")
    ax.set_title("step breakdown per run (" + ", ".join(keys) + "), " + BASIS["measured"], fontsize=9)
    ax.legend(fontsize=8)
    save(fig, os.path.join(out_dir, "breakdown.png"))


def capacity_plot(out_dir, keys, rows, target, answer, order, au):
    key = keys[0]
    ok = [r for r in rows if succeeded(r, au)]
    xs, order = x_axis([r[key] for r in ok], order)
    aus = [float(r[AU_COLUMN[au]]) for r in ok]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pairs = sorted(zip(xs, aus))
    ax.plot([p[0] for p in pairs], [p[1] for p in pairs], color="grey", alpha=0.5)
    passes = [a >= target for a in aus]
    for flag, color, label in ((True, "tab:green", "AU >= target"), (False, "tab:red", "AU < target")):
        ax.scatter([x for x, p in zip(xs, passes) if p == flag], [a for a, p in zip(aus, passes) if p == flag],
                   color=color, label=label, zorder=3)
    for x, a, r in zip(xs, aus, ok):
        ax.annotate(r["run"][4:], (x, a), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.axhline(target, color="black", linestyle=":", label=f"target {target}")
    if answer is not None:
        ax_x = x_axis([answer], order)[0][0] if order else float(answer)
        ax.axvline(ax_x, color="tab:blue", linestyle="--", label=f"answer {key}={answer}")
    if order:
        ax.set_xticks(range(len(order)), order)
    ax.set_xlabel(key)
    ax.set_ylabel("accelerator utilization (worst core)" if au == "measured"
                  else "projected accelerator utilization (target pod)")
    ax.set_title(f"capacity: {key} for AU >= {target}, {BASIS[au]}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    save(fig, os.path.join(out_dir, "capacity.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--target-au", type=float, default=0.9)
    parser.add_argument("--au", choices=sorted(AU_COLUMN), default="measured",
                        help="the AU the AU and capacity plots show")
    parser.add_argument("--answer", help="capacity: the value found")
    parser.add_argument("--order", help="capacity over a list: the values in order, a,b,c")
    args = parser.parse_args()
    runs, capacity = os.path.join(args.dir, "runs.csv"), os.path.join(args.dir, "capacity.csv")
    if not os.path.exists(runs) and not os.path.exists(capacity):
        print(f"plot_sweep: {args.dir} has neither runs.csv nor capacity.csv", file=sys.stderr)
        return 2
    if os.path.exists(runs):
        keys, rows = read_csv(runs)
        line_plot(args.dir, keys, rows, "throughput.png", [("examples_per_s", "-")], "examples/s (total)",
                  "examples/s (the cores' total), " + BASIS["measured"])
        if args.au == "measured":
            line_plot(args.dir, keys, rows, "au.png", [("au_min", "-"), ("au_mean", "--")],
                      "accelerator utilization", "accelerator utilization, " + BASIS["measured"],
                      target=args.target_au)
        else:
            line_plot(args.dir, keys, rows, "au.png", [("projected_au", "-")],
                      "projected accelerator utilization (target pod)",
                      "accelerator utilization, " + BASIS["projected"], target=args.target_au,
                      au="projected")
        breakdown_plot(args.dir, keys, rows)
    if os.path.exists(capacity):
        keys, rows = read_csv(capacity)
        order = args.order.split(",") if args.order else None
        capacity_plot(args.dir, keys, rows, args.target_au, args.answer, order, args.au)
    return 0


if __name__ == "__main__":
    sys.exit(main())
