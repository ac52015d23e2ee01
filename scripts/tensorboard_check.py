#!/usr/bin/env python3
"""Loads the TensorBoard event files of a `zero train` run with TensorBoard itself and checks them
against the run's csv_monitor files (issue 17: "load in TensorBoard itself" where Python's
tensorboard package is at hand; the GPU test machine has it, the development machine does not).

  scripts/tensorboard_check.py TB_DIR CSV_DIR

TB_DIR holds the events.out.tfevents.* file(s) (tensorboard.output_path/job_name), CSV_DIR the
csv_monitor files of the same run (csv_monitor.output_path/job_name). For every metric in
CSV_DIR, TensorBoard's EventAccumulator must list the scalar tag and return the same (step,
value) series: steps equal, values equal to f32 precision (TensorBoard stores simple_value as a
32-bit float; the CSV has the double). Exit status: 0 checked, 1 a mismatch, 2 tensorboard is
not installed here (nothing checked).
"""
import csv
import glob
import os
import sys


def csv_series(path):
    """(tag-less header, [(step, value)]) of one csv_monitor file."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    return header[1], [(int(r[0]), float(r[1])) for r in body if r]


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    tb_dir, csv_dir = argv[1], argv[2]
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        print(f"tensorboard check: SKIPPED, the tensorboard package is not installed ({e})")
        return 2
    files = glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))
    if not files:
        print(f"tensorboard check: FAIL, no events.out.tfevents.* file in {tb_dir}")
        return 1
    # size_guidance 0: keep every event (the default samples 1000 scalars per tag).
    acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))
    print(f"tensorboard check: {len(files)} event file(s), scalar tags: {sorted(tags)}")
    failures = 0
    checked = 0
    for path in sorted(glob.glob(os.path.join(csv_dir, "*.csv"))):
        # csv_monitor names a file after the tag with '/' and ' ' turned into '_'.
        stem = os.path.basename(path)[:-len(".csv")]
        matches = [t for t in tags if t.replace("/", "_").replace(" ", "_") == stem]
        if len(matches) != 1:
            print(f"  FAIL {stem}: no TensorBoard scalar tag for it (tags {sorted(tags)})")
            failures += 1
            continue
        tag = matches[0]
        _, expected = csv_series(path)
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if [s for s, _ in got] != [s for s, _ in expected]:
            print(f"  FAIL {tag}: steps {[s for s, _ in got][:5]}... vs csv {[s for s, _ in expected][:5]}...")
            failures += 1
            continue
        worst = max((abs(g - e) / max(abs(e), 1e-30) for (_, g), (_, e) in zip(got, expected)),
                    default=0.0)
        ok = worst <= 2.0 ** -23
        print(f"  {'ok  ' if ok else 'FAIL'} {tag}: {len(got)} events, largest relative "
              f"difference to the csv {worst:.2e}")
        failures += 0 if ok else 1
        checked += 1
    if checked == 0 and failures == 0:
        print(f"tensorboard check: FAIL, no csv_monitor files in {csv_dir} to compare with")
        return 1
    print(f"tensorboard check: {'PASS' if failures == 0 else 'FAIL'} ({checked} tags compared)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
