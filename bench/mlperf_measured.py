#!/usr/bin/env python3
"""The measured values of the training points (tests/data/validation/public_set.json), recomputed
from the MLPerf Training result logs they come from.

  python3 bench/mlperf_measured.py --mirrors /work/.mirror           the table: each point's recorded
                                                                     value, recomputed value and the
                                                                     difference
  python3 bench/mlperf_measured.py --mirrors /work/.mirror --check   exit 1 when a point differs by
                                                                     more than 0.05% (DIFFERS), its
                                                                     conditions no longer state the
                                                                     derivation followed (TEXT), or
                                                                     its logs cannot be read (ERROR)
  python3 bench/mlperf_measured.py --repo v0.7=PATH ...              one round from a plain checkout
                                                                     instead of --mirrors
  python3 bench/mlperf_measured.py --only ID,ID --verbose ...        these points, with the figures
                                                                     behind each value

Each point's "source" is repository@commit:results-glob; --mirrors holds bare git copies at
<mirrors>/mlcommons+training_results_<round>/repo. The commit is read when the copy holds it, else
HEAD, with a note below the table.

Each point is derived as its "conditions" text says, by one of four derivations (DERIVATIONS):
ResNet-50 (a block's samples: the training steps its runner executes times the logged
global_batch_size; a block whose log brackets its evaluation timed up to its eval_start), BERT
of v0.7 (a block's samples: epoch_count steps of the logged global_batch_size), BERT of v1.0 (seconds per step, compared per sequence slot of the longest
bucket) and GPT-3 (seconds per step, epoch_count counting tokens). Each derivation lists phrases its
points' conditions texts state; a text that no longer states one is reported (TEXT), so the texts
and this script cannot drift apart unseen. Numbers the logs do not hold come from the submission's
run_and_time.sh (bucket sizes, core count, iterations_per_loop, steps_per_loop) or CORES_PER_CHIP.
"""
import argparse
import fnmatch
import json
import math
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "validation", "public_set.json")
TOLERANCE_PCT = 0.05  # how far a recomputed value may sit from the recorded one

# TensorCores per chip: a Cloud TPU v2/v3/v4/v5p slice's name counts TensorCores (two per chip),
# a v5e slice's counts chips (one TensorCore each) -- Google Cloud's TPU version documentation.
CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5e": 1, "v5l": 1}

SOURCE_PATTERN = re.compile(r"^mlcommons/training_results_(?P<round>v[\d.]+)@(?P<commit>[0-9a-f]{7,40}):(?P<glob>.+)$")


# --- the result repositories -------------------------------------------------------------------

class MirrorRepo:
    """A bare git copy of a results repository, read at one commit."""

    def __init__(self, git_dir):
        self.git_dir = git_dir

    def _git(self, *args):
        done = subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"git --git-dir {self.git_dir} {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def resolve(self, commit):
        """(the revision to read, a note when it is not `commit`)."""
        done = subprocess.run(["git", "--git-dir", self.git_dir, "cat-file", "-e", commit + "^{commit}"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            return commit, None
        head = self._git("rev-parse", "HEAD").strip()
        return head, f"commit {commit[:12]} is not in {self.git_dir}: read HEAD {head[:12]}"

    def list_files(self, revision, directory):
        return self._git("ls-tree", "-r", "--name-only", revision, directory.rstrip("/") + "/").split("\n")[:-1]

    def read(self, revision, path):
        return self._git("show", f"{revision}:{path}")


class CheckoutRepo:
    """A plain checkout of a results repository: its files as they are, whatever the commit."""

    def __init__(self, root):
        self.root = root

    def resolve(self, commit):
        return None, f"read the checkout {self.root} as it is (commit {commit[:12]} not checked)"

    def list_files(self, revision, directory):
        top = os.path.join(self.root, directory)
        found = []
        for parent, _, names in os.walk(top):
            found += [os.path.relpath(os.path.join(parent, n), self.root).replace(os.sep, "/") for n in names]
        return sorted(found)

    def read(self, revision, path):
        with open(os.path.join(self.root, path)) as f:
            return f.read()


def open_repos(mirrors, overrides):
    """round ('v0.7') -> repository, from --mirrors and --repo ROUND=PATH."""
    repos = {}
    if mirrors:
        for name in sorted(os.listdir(mirrors)):
            m = re.fullmatch(r"mlcommons\+training_results_(v[\d.]+)", name)
            if m and os.path.isdir(os.path.join(mirrors, name, "repo")):
                repos[m.group(1)] = MirrorRepo(os.path.join(mirrors, name, "repo"))
    for spec in overrides:
        round_name, _, path = spec.partition("=")
        if not path or not os.path.isdir(path):
            sys.exit(f"mlperf_measured: --repo {spec}: want ROUND=DIRECTORY (e.g. v0.7=/src/training_results_v0.7)")
        repos[round_name] = CheckoutRepo(path)
    return repos


# --- the logs ----------------------------------------------------------------------------------

def parse_log(text):
    """The log's events in file order, as (seconds, key, value, metadata). v0.6 logs write
    ':::MLL <seconds> <key>: {"value": .., "metadata": ..}', later rounds ':::MLLOG {json}' with
    time_ms."""
    events = []
    for line in text.splitlines():
        if line.startswith(":::MLLOG "):
            record = json.loads(line[len(":::MLLOG "):])
            events.append((record["time_ms"] / 1000.0, record["key"], record.get("value"), record.get("metadata") or {}))
        elif line.startswith(":::MLL "):
            m = re.match(r":::MLL (\S+) (\w+): (.*)$", line)
            record = json.loads(m.group(3))
            events.append((float(m.group(1)), m.group(2), record.get("value"), record.get("metadata") or {}))
    return events


def logged(events, *keys):
    """The value of the first of `keys` the log holds (a run logs its configuration once)."""
    for key in keys:
        for _, k, value, _ in events:
            if k == key:
                return value
    raise ValueError(f"the log holds none of {', '.join(keys)}")


def blocks_of(events):
    """The run's blocks in the order they end: dicts of start and stop (seconds; start None for a
    block_stop no block_start opened, as the first of MaxText's and PAX's GPT-3 runs, which starts
    at run_start), epoch_count, and the eval_start/eval_stop intervals inside the block. A block's
    start and stop share first_epoch_num (v0.6 logs may write the next block_start before the
    block_stop it follows)."""
    open_blocks, blocks = {}, []
    for t, key, _, meta in events:
        if key == "block_start":
            open_blocks[meta["first_epoch_num"]] = (t, meta.get("epoch_count"))
        elif key == "block_stop":
            start, count = open_blocks.pop(meta["first_epoch_num"], (None, meta.get("epoch_count")))
            blocks.append({"start": start, "stop": t, "epoch_count": count, "evals": []})
    starts = [t for t, key, _, _ in events if key == "eval_start"]
    stops = [t for t, key, _, _ in events if key == "eval_stop"]
    for eval_start, eval_stop in zip(starts, stops):
        for b in blocks:
            if b["start"] is not None and b["start"] <= eval_start and eval_stop <= b["stop"]:
                b["evals"].append((eval_start, eval_stop))
    return blocks


def measured_blocks(blocks):
    """The blocks a value counts: the first block of the run dropped (its time holds compilation or
    warm-up, or, without a block_start, starts at run_start)."""
    rest = blocks[1:]
    if any(b["start"] is None for b in rest):
        raise ValueError("a block after the first has no block_start")
    return rest


def block_seconds(block):
    return block["stop"] - block["start"]


def training_seconds_to_eval_start(block):
    """The block's time up to its first eval_start (the whole block without one)."""
    return (block["evals"][0][0] if block["evals"] else block["stop"]) - block["start"]


# --- the submission's configuration ------------------------------------------------------------

def run_flags(repo, revision, benchmark, platform):
    """The flags of the submission's run_and_time.sh for this system (Google/benchmarks/<benchmark>/
    [implementations/]<platform>/run_and_time.sh): flag -> list of values, in order; None without
    exactly one such script."""
    scripts = [p for p in repo.list_files(revision, f"Google/benchmarks/{benchmark}")
               if p.endswith(f"/{platform}/run_and_time.sh")]
    if len(scripts) != 1:
        return None
    flags = {}
    for name, value in re.findall(r"--([A-Za-z0-9_]+)=(\S+)", repo.read(revision, scripts[0])):
        flags.setdefault(name, []).append(value)
    return flags


def chips_of(platform):
    """Chips of a result directory's system, e.g. tpu-v3-2048 -> 1024, cloud-tpu-v5e-4096-PAX -> 4096."""
    m = re.search(r"tpu-(v\d[a-z]?)-(\d+)", platform)
    if not m or m.group(1) not in CORES_PER_CHIP:
        raise ValueError(f"no chip count for system {platform}")
    return int(m.group(2)) // CORES_PER_CHIP[m.group(1)]


# --- the derivations ---------------------------------------------------------------------------

def median_of_run_medians(per_run):
    return statistics.median(statistics.median(values) for values in per_run)


def pooled_median(per_run):
    return statistics.median(v for values in per_run for v in values)


def resnet_steps_per_block(events, block, flags, platform):
    """The training steps a ResNet-50 runner executes in a block. The TF1 runners (v0.6, v0.7, v1.0)
    run --iterations_per_loop steps between evaluations, whatever the block's nominal epoch_count
    (157 steps of 32,768 images are 4.015 epochs). The TF2 runner drops each epoch's partial batch
    (drop_train_remainder) and runs epoch_count epochs of whole batches, --steps_per_loop at a time.
    v0.7's JAX runner (resnet-research-JAX train.py) rounds a block's epochs up to whole steps:
    steps_per_loop = ceil(train_samples / global_batch_size * epochs_per_loop)."""
    if flags and "iterations_per_loop" in flags:
        return int(flags["iterations_per_loop"][-1])
    if flags and "steps_per_loop" in flags:
        return block["epoch_count"] * (logged(events, "train_samples") // logged(events, "global_batch_size"))
    if platform.endswith("-JAX"):
        return math.ceil(logged(events, "train_samples") * block["epoch_count"] / logged(events, "global_batch_size"))
    raise ValueError("run_and_time.sh sets neither --iterations_per_loop nor --steps_per_loop")


def resnet_value(runs, context):
    """The samples a block trains over its seconds, per chip; median over a run's blocks, then over
    the runs. Where the log brackets the evaluation, the block counts up to its eval_start: the TF2
    runner logs eval_stop once it has dispatched the evaluation's steps and block_stop after their
    result (a median 2.34 s later on 16 chips), so eval_stop does not end the evaluation."""
    per_run, steps = [], set()
    for events, blocks in runs:
        batch = logged(events, "global_batch_size")
        values = []
        for b in measured_blocks(blocks):
            block_steps = resnet_steps_per_block(events, b, context["flags"], context["platform"])
            steps.add(block_steps)
            values.append(block_steps * batch / training_seconds_to_eval_start(b) / context["chips"])
        per_run.append(values)
    context["fields"].update(steps=steps.pop() if len(steps) == 1 else sorted(steps))
    return median_of_run_medians(per_run)


def bert_value(runs, context):
    """Samples per block over its seconds, per chip; median over a run's blocks, then over the runs.
    Google's v0.7 BERT runners log a block's epoch_count as its training steps (run_and_time.sh's
    --iterations_per_loop, --steps_per_loop for the TF2 runner), each of the logged
    global_batch_size sequences."""
    per_run = []
    for events, blocks in runs:
        batch = logged(events, "global_batch_size")
        per_run.append([b["epoch_count"] * batch / block_seconds(b) / context["chips"]
                        for b in measured_blocks(blocks)])
    return median_of_run_medians(per_run)


def longest_bucket_slots(flags):
    """Sequence slots of a step of the longest bucket: its batch per core (run_and_time.sh pairs
    --seq_len_buckets with --batch_size_buckets) times --num_tpu_cores."""
    lengths = [int(v) for v in flags["seq_len_buckets"]]
    batches = [int(v) for v in flags["batch_size_buckets"]]
    per_core = batches[lengths.index(max(lengths))]
    return per_core * int(flags["num_tpu_cores"][-1])


def bert_bucketed_value(runs, context):
    """v1.0 BERT: the seconds of a block, median over a run's blocks, then over the runs; over the
    block's steps (epoch_count: the runner's --iterations_per_loop) a step's seconds; compared per
    sequence slot of the longest bucket (the slowest core's step): slots / step / chips, i.e. the
    nominal global_batch_size per step scaled by slots / global_batch_size."""
    per_run, steps = [], set()
    for _, blocks in runs:
        chosen = measured_blocks(blocks)
        per_run.append([block_seconds(b) for b in chosen])
        steps |= {b["epoch_count"] for b in chosen}
    if len(steps) != 1:
        raise ValueError(f"blocks of different step counts: {sorted(steps)}")
    batches = {logged(events, "global_batch_size") for events, _ in runs}
    block_s = median_of_run_medians(per_run)
    step_s = block_s / steps.pop()
    slots = longest_bucket_slots(context["flags"])
    context["fields"].update(slots=slots, batch=batches.pop() if len(batches) == 1 else None,
                             block_s=round(block_s, 3), step_s=round(step_s, 4))
    return slots / step_s / context["chips"]


def gpt3_value(runs, context):
    """GPT-3: a block's seconds over its steps (epoch_count counts tokens: / max_sequence_length
    sequences / global_batch_size steps), median over the blocks of all runs together; the
    global_batch_size sequences of a step over its seconds, per chip."""
    per_run, batches = [], set()
    for events, blocks in runs:
        batch = logged(events, "global_batch_size")
        tokens_per_step = batch * logged(events, "max_sequence_length")
        batches.add(batch)
        per_run.append([block_seconds(b) / (b["epoch_count"] / tokens_per_step)
                        for b in measured_blocks(blocks)])
    if len(batches) != 1:
        raise ValueError(f"runs of different global batches: {sorted(batches)}")
    step_s = pooled_median(per_run)
    every = [s for values in per_run for s in values]
    context["fields"].update(step_s=round(step_s, 3), min_step_s=round(min(every), 3), max_step_s=round(max(every), 3))
    return batches.pop() / step_s / context["chips"]


# The phrases each derivation follows, as its points' conditions texts state them ({runs}: the
# number of result files; {slots} and {batch}: the scaling bert_bucketed_value applies).
DERIVATIONS = {
    "resnet": {"value": resnet_value, "states": [
        "the {steps} training steps its runner executes per block times the global batch, over block_stop - block_start",
        "first block of each run dropped", "median over blocks then over the {runs} runs",
        "Where the log brackets the evaluation (eval_start/eval_stop) the block ends at its eval_start"]},
    "bert": {"value": bert_value, "states": [
        "samples per block over block_stop - block_start", "first block of each run dropped",
        "median over blocks then over the {runs} runs"]},
    "bert_bucketed": {"value": bert_bucketed_value, "needs_flags": True, "states": [
        "over their steps, first block of each run dropped, median over blocks then over the {runs} runs",
        "sequence slots per chip per step", "as long as its slowest core", "x {slots} / {batch}"]},
    "gpt3": {"value": gpt3_value, "states": [
        "Seconds per step from the logged blocks", "first block of each run dropped",
        "median over the blocks of the {runs} runs"]},
}


def derivation_for(round_name, benchmark):
    if benchmark == "bert" and round_name == "v1.0":
        return "bert_bucketed"  # v1.0 buckets the sequences by length (--seq_len_buckets)
    if benchmark in DERIVATIONS:
        return benchmark
    raise ValueError(f"no derivation for {benchmark}")


def eval_bracket_claim(conditions):
    """What the text says of the logs' eval_start/eval_stop: True (brackets), False, or None."""
    if "here it does not" in conditions:
        return False
    if "here it does" in conditions:
        return True
    return None


# --- one point ---------------------------------------------------------------------------------

def recompute(point, repos):
    """The point's recomputed value and what went with it: notes, details."""
    m = SOURCE_PATTERN.match(point["source"])
    if not m:
        raise ValueError(f"source {point['source']!r} is not repository@commit:glob")
    round_name, commit, glob = m.group("round"), m.group("commit"), m.group("glob")
    if round_name not in repos:
        raise ValueError(f"no copy of training_results_{round_name} (--mirrors or --repo {round_name}=PATH)")
    repo = repos[round_name]
    revision, note = repo.resolve(commit)
    notes = [note] if note else []

    directory = glob.rsplit("/", 1)[0]
    files = sorted((p for p in repo.list_files(revision, directory) if fnmatch.fnmatchcase(p, glob)),
                   key=lambda p: [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p)])
    if not files:
        raise ValueError(f"no file matches {glob}")
    parts = directory.split("/")  # Google/results/<platform>/<benchmark>
    platform, benchmark = parts[-2], parts[-1]
    runs = []
    for path in files:
        events = parse_log(repo.read(revision, path))
        runs.append((events, blocks_of(events)))

    name = derivation_for(round_name, benchmark)
    derivation = DERIVATIONS[name]
    flags = run_flags(repo, revision, benchmark, platform)
    if derivation.get("needs_flags") and flags is None:
        raise ValueError(f"no single run_and_time.sh for {platform} under Google/benchmarks/{benchmark}")
    context = {"chips": chips_of(platform), "flags": flags, "platform": platform, "fields": {"runs": len(files)}}
    value = derivation["value"](runs, context)

    conditions = point["conditions"]
    stated = [s.format(**context["fields"]) for s in derivation["states"]]
    missing = [s for s in stated if s not in conditions]
    if missing:
        notes.append("the conditions do not state: " + "; ".join(f'"{s}"' for s in missing))
    bracketed = any(b["evals"] for _, blocks in runs for b in measured_blocks(blocks))
    claim = eval_bracket_claim(conditions)
    if claim is not None and claim != bracketed:
        notes.append(f"the conditions say the log {'brackets' if claim else 'does not bracket'} the evaluation;"
                     f" it {'does' if bracketed else 'does not'}")

    timed = training_seconds_to_eval_start if name == "resnet" else block_seconds
    seconds = [timed(b) for _, blocks in runs for b in measured_blocks(blocks)]
    detail = {"derivation": name, "runs": len(files), "blocks": len(seconds), "min_s": min(seconds),
              "max_s": max(seconds), "chips": context["chips"], "revision": revision,
              "fields": {k: v for k, v in context["fields"].items() if k != "runs"}}
    return {"value": value, "notes": notes, "detail": detail, "conditions_ok": not missing}


# --- the table ---------------------------------------------------------------------------------

def fmt_value(v):
    return f"{v:.6g}"


def difference_pct(value, reference):
    return 100.0 * (value - reference) / reference


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", help="directory of mlcommons+training_results_<round>/repo bare git copies")
    parser.add_argument("--repo", action="append", default=[], metavar="ROUND=PATH",
                        help="a plain checkout for one round, e.g. v0.7=/src/training_results_v0.7")
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--only", default="", help="comma-separated point ids")
    parser.add_argument("--verbose", action="store_true", help="the blocks behind each value")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not args.mirrors and not args.repo:
        sys.exit("mlperf_measured: give --mirrors DIR or --repo ROUND=PATH")

    with open(args.data) as f:
        points = [p for p in json.load(f)["points"] if p["category"] == "training"]
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if p["id"] in wanted]
    repos = open_repos(args.mirrors, args.repo)

    header = ["point", "recorded", "recomputed", "difference", ""]
    rows, notes, failures = [], [], []
    for p in points:
        recorded = p["measured"]["value"]
        try:
            r = recompute(p, repos)
        except (ValueError, RuntimeError, KeyError) as e:
            rows.append([p["id"], fmt_value(recorded), "-", "-", "ERROR"])
            notes.append((p["id"], f"error: {e}"))
            failures.append(p["id"])
            continue
        diff = difference_pct(r["value"], recorded)
        ok = abs(diff) <= TOLERANCE_PCT and r["conditions_ok"]
        if not ok:
            failures.append(p["id"])
        row = [p["id"], fmt_value(recorded), fmt_value(r["value"]), f"{diff:+.3f}%",
               "" if ok else ("DIFFERS" if abs(diff) > TOLERANCE_PCT else "TEXT")]
        rows.append(row)
        notes += [(p["id"], n) for n in r["notes"]]
        if args.verbose:
            d = r["detail"]
            notes.append((p["id"], f"{d['derivation']}: {d['runs']} runs, {d['blocks']} blocks counted, "
                                   f"{d['chips']} chips, block seconds {d['min_s']:.3f} to {d['max_s']:.3f}, "
                                   f"read at {d['revision'] or 'the checkout'}"
                                   + "".join(f", {k} {v}" for k, v in d["fields"].items())))

    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
    if notes:
        print()
        for point_id, note in notes:
            print(f"{point_id}: {note}")
    print()
    print(f"{len(points) - len(failures)} of {len(points)} points reproduce within {TOLERANCE_PCT}%"
          + (f"; not: {', '.join(failures)}" if failures else ""))
    if args.check and failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
