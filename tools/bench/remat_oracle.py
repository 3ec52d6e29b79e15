#!/usr/bin/env python3
"""An exact oracle for remat's plans: Checkmate's MILP over remat's own model.

For each graph, `remat-opt ... remat{strategy=none dump-model=FILE}` writes
remat's model of the training step (every node in schedule order with its
stage, operands, result bytes and the seconds remat's cost model predicts;
the persistent bytes). This script writes it as a mixed-integer program in
Checkmate's form (Jain et al., MLSys 2020) and solves it with HiGHS:

  R[j,n]  forward node n is recomputed just before schedule position j (a
          backward position: remat recomputes nothing during forward);
  S[j,v]  forward value v is held at position j, after its last forward use.

  every forward operand v of a backward node at j:  S[j,v] + R[j,n(v)] >= 1
  R[j,n] <= S[j,u] + R[j,n(u)] for each forward operand u of n (or u is
          still live from forward at j);
  S[j,v] <= S[j-1,v] + R[j-1,n(v)] (a value is held only if it was held or
          just recomputed);
  memory at each position j: persistent + the bytes live there that remat
          does not choose (backward values, Constants, outputs; their live
          ranges as in the step without remat) + forward values still live
          from forward + sum S[j,v] bytes(v) + sum R[j,n] bytes(n) <= budget;
  minimise sum R[j,n] seconds(n).

The predicted step time is remat's no-remat time plus the objective, the
same sum remat reports. The smallest feasible peak is the same program with
the budget replaced by a variable that is minimised.

How the accounting differs from remat's planned peak (plan-memory's arena):
  - a value is counted over [definition, last use] as remat's Liveness does,
    its bytes rounded up to the arena's alignment as plan-memory rounds each
    buffer, and where the no-remat memory plan overwrites it in place it
    stops counting where that plan's does, as long as that overwriter is
    still its last use: a value held past its last use in the step without
    remat (a Gemm output kept to rebuild the Reshape that overwrote it in
    place, say) counts over the whole of its hold, as plan-memory cannot
    give its buffer to the overwriter then (a recompute clone is never
    taken to be overwritten in place, and no other sharing is modelled);
    without fragmentation (the arena's offsets are not modelled);
  - a node recomputed at j counts all its results through the whole of
    position j (Checkmate frees inside a stage; this program does not, so
    it is conservative there);
  - a Constant a recompute reads keeps its range from the step without
    remat, as in remat's rewrite, which copies it for a rebuild after its
    last use; the copy, live at the rebuild, is not counted (Constants are
    scalars here);
  - a value may be recomputed at any backward position and held over any
    positions (Checkmate's space); remat's plans rebuild a dropped value
    once or for each backward node that reads it, and hold a stashed value
    from forward for all of backward or through one of its backward
    readers (passes/remat/Rewrite.h).
So the oracle's optimum is exact for this program; compared with remat's
planned figures it is a reference, not a bound, and the table says so by
printing both peaks at no remat.

Usage:
  remat_oracle.py [--remat-opt PATH] [--bind B] [--budgets 8]
                  [--time-limit 60] [--max-variables 200000] MODEL...
Prints per graph and budget: graph, budget, oracle's optimum predicted time,
auto's predicted time and the gap; then the oracle's smallest feasible peak
against remat's. --json FILE writes the same rows, each budget's with the
optimum's plan: `oracle_recomputed` maps each node it recomputes (by its
first result's name) to how many times. Exit 1 when a graph is refused
(too large) or a solve ran out of time, unless --allow-unsolved.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TRAINING = "canonicalize,autodiff,dce,schedule"


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def run_remat_opt(args, model, pass_options, extra=()):
    """Runs remat-opt on model with remat{pass_options}; returns the result."""
    pipeline = f"{TRAINING},remat{{{pass_options}}},plan-memory"
    command = [args.remat_opt, model, "-p", pipeline]
    if args.bind:
        command += ["--bind", args.bind]
    # remat-opt prints the graph on stdout without -o: dropped.
    return subprocess.run(command + list(extra), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)


def load_model(args, model, directory):
    path = os.path.join(directory, "model.json")
    result = run_remat_opt(args, model, f"strategy=none dump-model={path}")
    if result.returncode != 0:
        fail(f"{model}: remat-opt failed: {result.stderr.strip()}")
    with open(path) as f:
        return json.load(f)


def remat_answer(args, model, budget, directory):
    """remat auto's plan at budget: (planned peak, predicted seconds) or
    None when infeasible."""
    report = os.path.join(directory, "report.json")
    result = run_remat_opt(args, model, f"budget={budget}",
                           ["--report", report])
    if result.returncode != 0:
        if "smallest feasible planned peak" in result.stderr:
            return None
        fail(f"{model}: remat-opt at budget {budget}: {result.stderr.strip()}")
    with open(report) as f:
        summary = find_remat_summary(json.load(f))
    return summary["planned_peak_bytes"], summary["predicted_seconds"]


def find_remat_summary(report):
    """The remat section's summary, wherever the report nests it."""
    if isinstance(report, dict):
        if "summary" in report and "planned_peak_bytes" in report["summary"]:
            return report["summary"]
        values = report.values()
    elif isinstance(report, list):
        values = report
    else:
        return None
    for value in values:
        found = find_remat_summary(value)
        if found:
            return found
    return None


def remat_smallest_peak(args, model, directory):
    result = run_remat_opt(args, model, "budget=1")
    match = re.search(r"smallest feasible planned peak is [^(]*\((\d+) B",
                      result.stderr)
    if not match:
        fail(f"{model}: no smallest feasible peak in: {result.stderr.strip()}")
    return int(match.group(1))


class Program:
    """Checkmate's MILP over remat's model of one step (see the docstring)."""

    def __init__(self, model):
        nodes = model["nodes"]
        self.persistent = model["persistent_bytes"]
        inputs = {name for name, _ in model["inputs"]}
        outputs = set(model["outputs"])
        align = model["arena_alignment"]
        self.align = align
        n_positions = len(nodes)
        self.n_positions = n_positions
        size, defined_at, node_of, counted_last = {}, {}, {}, {}
        last_use = {}
        last_forward_use = {}
        for j, node in enumerate(nodes):
            for name in node["operands"]:
                if name in inputs:
                    continue
                last_use[name] = j
                if node["stage"] == "fwd":
                    last_forward_use[name] = j
            for name, nbytes, counted in node["results"]:
                # plan-memory rounds every buffer up to the alignment.
                nbytes = -(-nbytes // align) * align
                size[name] = nbytes
                counted_last[name] = counted
                defined_at[name] = j
                node_of[name] = j
                last_use.setdefault(name, j)
                last_forward_use.setdefault(name, j)
        for name in outputs:
            if name in defined_at:
                last_use[name] = n_positions - 1
        # Forward nodes remat may recompute: not Constants, no graph output.
        self.recomputable = set()
        for j, node in enumerate(nodes):
            if node["stage"] != "fwd" or node["op"] == "Constant":
                continue
            if any(name in outputs for name, *_ in node["results"]):
                continue
            self.recomputable.add(j)
        choosable = {name for name in size
                     if node_of[name] in self.recomputable}
        # The last position that needs a choosable value: its own backward
        # uses, and those of the forward values recomputed from it.
        need = {name: last_use[name] for name in choosable
                if last_use[name] > last_forward_use[name]}
        for j in range(n_positions - 1, -1, -1):
            if j not in self.recomputable:
                continue
            # Later nodes are final: this node's results are.
            results_need = max(need.get(name, -1)
                               for name, *_ in nodes[j]["results"])
            for name in nodes[j]["operands"]:
                if name in choosable:
                    need[name] = max(need.get(name, -1), results_need)
        self.nodes, self.size, self.node_of = nodes, size, node_of
        self.counted_last, self.last_use = counted_last, last_use
        self.outputs = [name for name in outputs if name in size]
        self.choosable, self.need = choosable, need
        self.last_forward_use = last_forward_use
        # Bytes live at each position that remat does not choose, and the
        # choosable values still live from forward.
        self.fixed = [0] * n_positions
        for name, nbytes in size.items():
            # Where plan-memory overwrites a value in place, it stops
            # counting before the node that overwrites it.
            end = min(last_forward_use[name] if name in choosable
                      else last_use[name], counted_last[name])
            for j in range(defined_at[name], end + 1):
                self.fixed[j] += nbytes
        self.backward = [j for j, node in enumerate(nodes)
                         if node["stage"] != "fwd"]
        self.node_bytes = {j: sum(size[name] for name, *_ in nodes[j]["results"])
                           for j in self.recomputable}
        self.count_variables()

    def count_variables(self):
        self.held_range = {}
        n_held = 0
        for name in self.choosable:
            first = self.last_forward_use[name] + 1
            last = self.need.get(name, -1)
            if last >= first:
                self.held_range[name] = (first, last)
                n_held += last - first + 1
        n_recompute = 0
        for j in self.recomputable:
            last = max(self.need.get(name, -1)
                       for name, *_ in self.nodes[j]["results"])
            n_recompute += sum(1 for b in self.backward if b <= last)
        self.n_variables = n_held + n_recompute

    def build(self, highspy, budget):
        """\returns a Highs instance with the program; budget None: minimise
        the peak instead of the recompute seconds."""
        inf = highspy.kHighsInf
        columns = []  # (cost, lower, upper, integer)
        held, recompute = {}, {}

        def column(cost, integer=True, upper=1.0):
            columns.append((cost, 0.0, upper, integer))
            return len(columns) - 1

        minimise_peak = budget is None
        for name, (first, last) in self.held_range.items():
            for j in range(first, last + 1):
                held[(j, name)] = column(0.0)
        backward = self.backward
        for j in self.recomputable:
            last = max(self.need.get(name, -1)
                       for name, *_ in self.nodes[j]["results"])
            seconds = 0.0 if minimise_peak else self.nodes[j]["seconds"]
            for b in backward:
                if b <= last:
                    recompute[(b, j)] = column(seconds)
        peak = column(1.0, integer=False, upper=inf) if minimise_peak else None
        # Kept for reading a solution's values (which value is held or
        # recomputed where).
        self.held_columns, self.recompute_columns = held, recompute

        rows = []  # (lower, upper, [(column, value)])

        def available(j, name):
            """Terms that make name available at j, or None if it is still
            live from forward (or never needs choosing)."""
            if name not in self.choosable or j <= self.last_forward_use[name]:
                return None
            terms = []
            if (j, name) in held:
                terms.append(held[(j, name)])
            if (j, self.node_of[name]) in recompute:
                terms.append(recompute[(j, self.node_of[name])])
            return terms

        for j in backward:
            for name in self.nodes[j]["operands"]:
                terms = available(j, name)
                if terms is None:
                    continue
                if not terms:
                    return None  # cannot happen: need covers every use
                rows.append((1.0, inf, [(c, 1.0) for c in terms]))
        for (j, n), r in recompute.items():
            for name in self.nodes[n]["operands"]:
                terms = available(j, name)
                if terms is None:
                    continue
                rows.append((0.0, inf, [(c, 1.0) for c in terms] + [(r, -1.0)]))
        for (j, name), s in held.items():
            first, _ = self.held_range[name]
            if j == first:
                continue  # held from forward: free
            terms = [(s, 1.0)]
            if (j - 1, name) in held:
                terms.append((held[(j - 1, name)], -1.0))
            if (j - 1, self.node_of[name]) in recompute:
                terms.append((recompute[(j - 1, self.node_of[name])], -1.0))
            rows.append((-inf, 0.0, terms))
        memory = [[] for _ in range(self.n_positions)]
        for (j, name), s in held.items():
            # After counted_last, up to its last use in the step without
            # remat, a held value's storage is its in-place overwriter's,
            # counted there, unless the value is also held after that use
            # (to feed recomputes): then plan-memory cannot share it. Held
            # after that use, it always counts.
            nbytes = float(self.size[name])
            if j <= self.counted_last[name] or j > self.last_use[name]:
                memory[j].append((s, nbytes))
            elif (self.last_use[name] + 1, name) in held:
                memory[j].append((held[(self.last_use[name] + 1, name)],
                                  nbytes))
        for (j, n), r in recompute.items():
            memory[j].append((r, float(self.node_bytes[n])))
        for j in range(self.n_positions):
            constant = self.persistent + self.fixed[j]
            if minimise_peak:
                rows.append((-inf, -constant, memory[j] + [(peak, -1.0)]))
            else:
                rows.append((-inf, budget - constant, memory[j]))

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        lp = highspy.HighsLp()
        lp.num_col_ = len(columns)
        lp.num_row_ = len(rows)
        lp.col_cost_ = [c[0] for c in columns]
        lp.col_lower_ = [c[1] for c in columns]
        lp.col_upper_ = [c[2] for c in columns]
        lp.integrality_ = [highspy.HighsVarType.kInteger if c[3]
                           else highspy.HighsVarType.kContinuous
                           for c in columns]
        lp.row_lower_ = [r[0] for r in rows]
        lp.row_upper_ = [r[1] for r in rows]
        starts, indices, values = [], [], []
        for _, _, terms in rows:
            starts.append(len(indices))
            for c, v in terms:
                indices.append(c)
                values.append(v)
        starts.append(len(indices))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = indices
        lp.a_matrix_.value_ = values
        lp.a_matrix_.num_col_ = len(columns)
        lp.a_matrix_.num_row_ = len(rows)
        h.passModel(lp)
        return h

    def solve(self, highspy, budget, time_limit):
        """\returns ("optimal", objective), ("infeasible", None) or
        ("time limit", best objective or None)."""
        h = self.build(highspy, budget)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("mip_rel_gap", 1e-6)
        h.run()
        status = h.getModelStatus()
        self.last_recomputed = {}
        if status == highspy.HighsModelStatus.kOptimal:
            # The optimum's plan: each recomputed node (its first result's
            # name) and how many times the backward rebuilds it.
            values = h.getSolution().col_value
            for (_, j), col in self.recompute_columns.items():
                if values[col] > 0.5:
                    name = self.nodes[j]["results"][0][0]
                    self.last_recomputed[name] = self.last_recomputed.get(name, 0) + 1
            return "optimal", h.getInfo().objective_function_value
        if status == highspy.HighsModelStatus.kInfeasible:
            return "infeasible", None
        if status == highspy.HighsModelStatus.kModelEmpty and budget is not None:
            # Nothing to choose (no variable): the step's one peak either
            # fits the budget, with nothing recomputed, or does not.
            status, peak = self.solve(highspy, None, time_limit)
            if status != "optimal":
                return status, None
            return ("optimal", 0.0) if peak <= budget + 0.5 else ("infeasible", None)
        if status == highspy.HighsModelStatus.kTimeLimit:
            info = h.getInfo()
            best = (info.objective_function_value
                    if info.primal_solution_status == 2 else None)
            return "time limit", best
        return highspy.Highs().modelStatusToString(status), None

    def candidates(self, model):
        """The values a remat plan decides to hold: the stash, the segment
        boundaries and the side inputs (Note [Brute-force space] in
        tests/unit/RematBruteForceTest.cpp)."""
        names = []
        for name in (model["stashed"] + model["segment_inputs"] +
                     model["side_inputs"]):
            if name in self.choosable and name not in names:
                names.append(name)
        return names

    def rewrite_cost(self, held):
        """remat's rewrite of the step holding the choosable values in
        HELD: each other one a backward node reads is rebuilt once, just
        before the first backward node that needs it, from what is held
        (rebuilding what it needs too), and the rebuilt value serves every
        later use. \returns (peak under this program's accounting,
        recompute seconds)."""
        stashed = {name for j in self.backward
                   for name in self.nodes[j]["operands"]
                   if name in self.choosable}
        schedule = []  # (operands, results) in the rewritten order
        position = {}  # original position -> rewritten one
        rebuilt = {}   # original value -> its clone's name
        seconds = 0.0

        def is_held(name):
            if name not in self.choosable:
                return True
            return name in held

        def materialize(name):
            nonlocal seconds
            if is_held(name):
                return name
            if name in rebuilt:
                return rebuilt[name]
            j = self.node_of[name]
            operands = [materialize(u) for u in self.nodes[j]["operands"]]
            results = []
            for result, *_ in self.nodes[j]["results"]:
                rebuilt[result] = result + ".remat"
                results.append((result + ".remat", self.size[result]))
            schedule.append((operands, results))
            seconds += self.nodes[j]["seconds"]
            return rebuilt[name]

        for j, node in enumerate(self.nodes):
            results = [(name, self.size[name]) for name, *_ in node["results"]]
            position[j] = len(schedule)
            if node["stage"] == "fwd":
                schedule.append((node["operands"], results))
                continue
            operands = [materialize(u) if u in stashed else u
                        for u in node["operands"]]
            schedule.append((operands, results))
        defined, last = {}, {}
        for i, (operands, results) in enumerate(schedule):
            for name in operands:
                last[name] = i
            for name, nbytes in results:
                defined[name] = (i, nbytes)
                last.setdefault(name, i)
        for name in self.outputs:
            last[name] = len(schedule) - 1
        live = [0] * len(schedule)
        for name, (i, nbytes) in defined.items():
            end = last[name]
            if name in self.counted_last and \
                    self.counted_last[name] < self.last_use[name] and \
                    end <= position[self.counted_last[name] + 1]:
                # Overwritten in place by the node after counted_last, when
                # that is still its last use.
                end = min(end, position[self.counted_last[name] + 1] - 1)
            for k in range(i, end + 1):
                live[k] += nbytes
        return self.persistent + max(live), seconds

    def brute_force(self, model, limit):
        """Every held set of the candidates: the Pareto front of (peak,
        seconds), or None with more than LIMIT candidates."""
        names = self.candidates(model)
        if len(names) > limit:
            return None
        always = self.choosable - set(names)
        # Values outside the candidates: held only if not stashed (remat
        # never drops them, and never keeps one that is not a candidate).
        stash = set(model["stashed"])
        base = {name for name in always if name in stash}
        plans = []
        for mask in range(1 << len(names)):
            held = base | {names[i] for i in range(len(names))
                           if mask >> i & 1}
            plans.append(self.rewrite_cost(held))
        plans.sort()
        front = []
        for peak, seconds in plans:
            if not front or seconds < front[-1][1] - 1e-15:
                front.append((peak, seconds))
        return front

    def no_remat_peak(self):
        """The program's peak with every stashed value held to its last
        backward use and nothing recomputed (the step without remat)."""
        live = list(self.fixed)
        for name in self.held_range:
            first, _ = self.held_range[name]
            last = max((j for j in self.backward
                        if name in self.nodes[j]["operands"]), default=-1)
            for j in range(first, min(last, self.counted_last[name]) + 1):
                live[j] += self.size[name]
        return self.persistent + max(live, default=0)


def check_brute_force(args, graph, model, program, highspy, oracle_peak):
    """Compares the oracle with every plan of remat's space, priced by this
    program's accounting: the oracle's space holds them all, so at each
    point of their Pareto front its optimum is at most the point's time, and
    its smallest peak at most theirs. \returns False if it is not."""
    front = program.brute_force(model, args.brute_force)
    if front is None:
        print(f"{graph}: brute force: more than {args.brute_force} "
              f"candidates, skipped")
        return True
    ok = oracle_peak <= front[0][0]
    equal = 0
    for peak, seconds in front:
        status, objective = program.solve(highspy, peak, args.time_limit)
        if status != "optimal" or objective > seconds * (1 + 1e-9) + 1e-15:
            print(f"{graph}: brute force: at {peak} B the oracle gives "
                  f"{status} {objective}, a plan of remat's takes {seconds}")
            ok = False
        elif objective >= seconds * (1 - 1e-9) - 1e-15:
            equal += 1
    print(f"{graph}: brute force: {len(front)} Pareto points of "
          f"{2 ** len(program.candidates(model))} plans; oracle at most "
          f"brute force at every point: {'yes' if ok else 'NO'}, equal at "
          f"{equal}/{len(front)}; smallest peak oracle {oracle_peak} B, "
          f"brute force {front[0][0]} B")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--remat-opt", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
        "remat-opt"))
    parser.add_argument("--bind", default="")
    parser.add_argument("--budgets", type=int, default=8)
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per MILP solve")
    parser.add_argument("--max-variables", type=int, default=200000,
                        help="refuse a graph whose program has more")
    parser.add_argument("--allow-unsolved", action="store_true")
    parser.add_argument("--brute-force", type=int, default=0, metavar="K",
                        help="also enumerate remat's plans (graphs with at "
                        "most K candidate values) under this program's "
                        "accounting and check the oracle against them")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    if args.budgets < 1:
        fail("--budgets must be at least 1")
    if args.time_limit <= 0:
        fail("--time-limit must be positive")
    try:
        import highspy
    except ImportError:
        fail("the oracle needs highspy (pip install highspy==1.15.1)")
    if not os.path.exists(args.remat_opt):
        fail(f"--remat-opt: no such file: {args.remat_opt}")

    unsolved = wrong = False
    rows = []
    print(f"{'graph':<28} {'budget B':>12} {'oracle s':>12} {'auto s':>12} "
          f"{'gap':>8}")
    for model_path in args.models:
        graph = os.path.splitext(os.path.basename(model_path))[0]
        if graph == "model":
            graph = os.path.basename(os.path.dirname(model_path))
        with tempfile.TemporaryDirectory() as directory:
            model = load_model(args, model_path, directory)
            program = Program(model)
            if program.n_variables > args.max_variables:
                print(f"{graph}: too large for the oracle: "
                      f"{program.n_variables} variables "
                      f"(--max-variables {args.max_variables})")
                unsolved = True
                continue
            started = time.monotonic()
            status, oracle_peak = program.solve(highspy, None, args.time_limit)
            if status != "optimal":
                print(f"{graph}: smallest feasible peak: {status} after "
                      f"{time.monotonic() - started:.1f} s "
                      f"({program.n_variables} variables)")
                unsolved = True
                continue
            oracle_peak = int(round(oracle_peak))
            remat_peak = remat_smallest_peak(args, model_path, directory)
            base_peak = model["no_remat_planned_peak_bytes"]
            base_seconds = model["no_remat_predicted_seconds"]
            low = max(oracle_peak, remat_peak)
            budgets = sorted({low + (base_peak - low) * k //
                              max(1, args.budgets - 1)
                              for k in range(args.budgets)})
            for budget in budgets:
                status, objective = program.solve(highspy, budget,
                                                  args.time_limit)
                recomputed = dict(sorted(program.last_recomputed.items()))
                answer = remat_answer(args, model_path, budget, directory)
                oracle = (base_seconds + objective
                          if status == "optimal" else None)
                auto = answer[1] if answer else None
                gap = (auto / oracle - 1
                       if oracle is not None and auto is not None and oracle > 0
                       else None)
                if status not in ("optimal", "infeasible"):
                    unsolved = True
                print(f"{graph:<28} {budget:>12} "
                      f"{(f'{oracle:.6e}' if oracle is not None else status):>12} "
                      f"{(f'{auto:.6e}' if auto is not None else 'infeasible'):>12} "
                      f"{(f'{gap:+.2%}' if gap is not None else '-'):>8}")
                rows.append({"graph": graph, "budget": budget,
                             "oracle_status": status,
                             "oracle_seconds": oracle, "auto_seconds": auto,
                             "auto_planned_peak":
                                 answer[0] if answer else None,
                             "gap": gap,
                             "oracle_recomputed": recomputed})
            if args.brute_force and not check_brute_force(
                    args, graph, model, program, highspy, oracle_peak):
                wrong = True
            peak_gap = remat_peak / oracle_peak - 1
            print(f"{graph:<28} smallest peak: oracle {oracle_peak} B, remat "
                  f"{remat_peak} B ({peak_gap:+.2%}); no remat: oracle "
                  f"{program.no_remat_peak()} B, remat planned {base_peak} B; "
                  f"{program.n_variables} variables")
            rows.append({"graph": graph, "oracle_smallest_peak": oracle_peak,
                         "remat_smallest_peak": remat_peak,
                         "oracle_no_remat_peak": program.no_remat_peak(),
                         "remat_no_remat_peak": base_peak,
                         "variables": program.n_variables})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if wrong or (unsolved and not args.allow_unsolved):
        sys.exit(1)


if __name__ == "__main__":
    main()
