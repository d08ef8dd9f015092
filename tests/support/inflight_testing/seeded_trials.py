"""What the seeded chaos runners share (tests/e2e/test_chaos.py, the runs and
the results repo; tests/e2e/test_model_chaos.py, the model path): the order
faults are drawn in, the trials CI runs, the command line, and running many
trials with a report of each.

A runner gives its FAULTS (name -> function), its plan_trial(master_seed,
index, fault=None, seed=None, **options) whose plans have index, seed, fault
and describe(), and its run_trial(plan, root) that raises failure(...) or returns a
trial with summary()."""

import argparse
import os
import random
import shutil
import tempfile
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def fault_for(master_seed, index, faults):
    """Faults in a seeded order that covers each once per len(faults) trials."""
    names = sorted(faults)
    rounds = random.Random(f"{master_seed}:round{index // len(names)}")
    return rounds.sample(names, len(names))[index % len(names)]


def failure(name, plan, error, logs):
    """The AssertionError a failed trial raises: the runner's `name`, what the
    trial drew, the broken invariant (or the traceback of an unexpected
    error), where its logs are and the command that reruns it alone."""
    what = str(error) if isinstance(error, AssertionError) else traceback.format_exc()
    return AssertionError(f"{name} {plan.describe()}\n  broke: {what}\n  logs: {logs}\n"
                          f"  rerun: {plan.rerun()}")


def ci_plans(plan_trial, trials, seed):
    """CI's trials: `trials` of master seed `seed`, unless INFLIGHT_CHAOS_TRIALS
    and INFLIGHT_CHAOS_SEED say otherwise."""
    trials = int(os.environ.get("INFLIGHT_CHAOS_TRIALS", trials))
    seed = int(os.environ.get("INFLIGHT_CHAOS_SEED", seed))
    return [plan_trial(seed, k) for k in range(trials)]


def argument_parser(description, faults):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--trials", type=int, default=int(os.environ.get("INFLIGHT_CHAOS_TRIALS", 40)))
    parser.add_argument("--seed", type=int, default=os.environ.get("INFLIGHT_CHAOS_SEED"),
                        help="master seed (default: INFLIGHT_CHAOS_SEED, else a random one)")
    parser.add_argument("--only-trial", type=int, help="run trial K of --seed alone")
    parser.add_argument("--trial-seed", type=int, help="run one trial from its own seed")
    parser.add_argument("--fault", choices=sorted(faults), help="the fault of --trial-seed")
    parser.add_argument("--jobs", type=int, default=1, help="trials at once")
    parser.add_argument("--keep", action="store_true", help="keep the dirs of passing trials too")
    return parser


def parse_args(parser, argv):
    args = parser.parse_args(argv)
    args.seed = int(args.seed) if args.seed is not None else random.SystemRandom().randrange(2**31)
    if args.trial_seed is not None and args.fault is None:
        parser.error("--trial-seed needs --fault")
    return args


def plans_of(args, plan_trial, **options):
    if args.trial_seed is not None:
        return [plan_trial(None, 0, fault=args.fault, seed=args.trial_seed, **options)]
    if args.only_trial is not None:
        return [plan_trial(args.seed, args.only_trial, **options)]
    return [plan_trial(args.seed, k, **options) for k in range(args.trials)]


def run_trials(name, args, plans, run_trial, tallies):
    """Runs the plans, `args.jobs` at once, each in a dir of its own (removed
    when it passed, unless --keep); prints each outcome, then the faults and
    the other `tallies(plan)` drawn ({"disks": "kept", ...}), and every
    failure. Returns the exit code: 1 when a trial failed."""
    workdir = Path(tempfile.mkdtemp(prefix=f"inflight-{name}-{args.seed}-"))
    print(f"master seed {args.seed}, {len(plans)} trials, {args.jobs} at once, binaries "
          f"{os.environ.get('INFLIGHT_BIN_DIR', 'build/bin')}, dirs under {workdir}", flush=True)
    started = time.monotonic()

    def one(plan):
        root = workdir / f"trial-{plan.index}"
        root.mkdir()
        t0 = time.monotonic()
        try:
            trial = run_trial(plan, root)
        except AssertionError as e:
            print(f"FAIL {e}", flush=True)
            return str(e)
        print(f"ok   {plan.describe()} ({time.monotonic() - t0:.1f}s)\n     {trial.summary()}",
              flush=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        return None

    with ThreadPoolExecutor(args.jobs) as pool:
        failures = [(p, msg) for p, msg in zip(plans, pool.map(one, plans)) if msg]
    counts = {"faults": Counter(p.fault for p in plans)}
    for plan in plans:
        for key, value in tallies(plan).items():
            counts.setdefault(key, Counter())[value] += 1
    print(f"\n{len(plans)} trials in {time.monotonic() - started:.0f}s")
    for key, counter in counts.items():
        print(f"{key}: {dict(sorted(counter.items()))}")
    print(f"{len(failures)} failed" + "".join(f"\n  trial {p.index} seed {p.seed} {p.fault}: "
                                             f"{msg.splitlines()[1].strip()}" for p, msg in failures))
    return 1 if failures else 0
