#!/usr/bin/env python3
"""The GPU run's report: TOP/results/report.md, from what the run left there.

    python3 report.py TOP

The one place a run's findings are written out: the plan (plan.py: what was built, and each setting that
differs from conda-forge's build, with its reason), run.sh's steps (results/steps.tsv and their logs),
package.py's steps (results/package.json) and upstream's operator suite per run (results/<run>.cases,
written by case_log.py). The standard library alone: run.sh writes it with the image's Python, whatever
else the run installed.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from plan import Plan, load

def contrib_cases(suite: Path) -> set[str]:
    """Test methods of the operator suite that build a com.microsoft node, directly or through a
    module-level helper that does."""
    source = suite.read_text(encoding="utf-8")
    tree = ast.parse(source)
    helpers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and "com.microsoft" in (ast.get_source_segment(source, node) or "")}
    cases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            text = ast.get_source_segment(source, node) or ""
            if "com.microsoft" in text or any(re.search(rf"\b{h}\(", text) for h in helpers):
                cases.add(node.name)
    return cases


# a case's line in the log case_log.py writes: `PATH::Class::test: PHASE OUTCOME[: MESSAGE]`
CASE_LINE = re.compile(r"^\S+::(\w+)::(\w+): \S+ (passed|failed|skipped)(?:: (.*))?$")
# and the line it writes before it ends a worker whose case ran past its limit
STUCK_LINE = re.compile(r"^\S+::(\w+)::(\w+) is (still running after \S+ s)")


def case_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Class.case -> (outcome, first line of its message); a case that failed in any phase failed."""
    outcomes: dict[str, tuple[str, str]] = {}
    for line in path.read_text(errors="replace").splitlines():
        match = STUCK_LINE.match(line) or CASE_LINE.match(line)
        if not match:
            continue
        name = f"{match[1]}.{match[2]}"
        if match.re is STUCK_LINE:
            outcomes[name] = ("failed", match[3])
        elif outcomes.get(name, ("",))[0] != "failed":
            outcomes[name] = (match[3], (match[4] or "")[:200])
    return outcomes


# run.sh stamps each line of a step's log with the seconds since the step started
STAMP = re.compile(r"^\+\d+s ")


def _log_lines(log: Path) -> list[str]:
    return [STAMP.sub("", line) for line in log.read_text(errors="replace").splitlines()]


# What a step's log says it did: devices found, where the model ran, how it ended.
EVIDENCE = re.compile(r"^(devices |session |compare |Found \d|SKIP|OK: Inference|onnxruntime \d|== .*: (ok|FAILED) in |"
                      r"FAILED|FAIL |ok[: ]|Timeout|.* timed out after|=+ .*(passed|failed|error).* =+$|"
                      r"\d+ (passed|failed))")


def _evidence(log: Path) -> str:
    if not log.exists():
        return "(no log)"
    lines = [line.strip()[:160] for line in _log_lines(log) if EVIDENCE.match(line)]
    return " / ".join(lines[-4:]).replace("|", "/") or "(nothing recognised; see the log)"


def _command(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "(unavailable)"


def _run_steps(results: Path) -> list[str]:
    """run.sh's steps: each one ended (steps.tsv) and each one started but not ended, with what its log says."""
    lines = ["", "## Steps", "", "| step | exit | seconds | what its log says |", "|---|---|---|---|"]
    steps = results / "steps.tsv"
    ended = [row.split("\t") for row in (steps.read_text().splitlines() if steps.exists() else [])]
    for name, status, seconds in ended:
        lines.append(f"| {name} | {status} | {seconds} | {_evidence(results / f'{name}.log')} |")
    progress = results / "progress.txt"
    started = re.findall(r"^\S+ (\S+): started, limit", progress.read_text(), re.M) if progress.exists() else []
    finished = {row[0] for row in ended}
    for name in [name for name in started if name not in finished]:
        lines.append(f"| {name} | running | | {_evidence(results / f'{name}.log')} |")
    return lines


def _overrides(plan: Plan) -> list[str]:
    lines = ["", "## Settings that differ from conda-forge's build (none of them is in the recipe)", ""]
    settings = [(kind, setting) for kind in ("context", "env", "cmake") for setting in getattr(plan.overrides, kind)]
    lines += [f"- {kind} `{name}` = `{value}`: {reason}" for kind, (name, value, reason) in settings]
    lines += [f"- patch `{Path(patch).name}`, on top of the recipe's: measured here, not in the recipe"
              for patch in plan.patches]
    if settings or plan.patches:
        return lines
    if plan.package is not None:
        return [*lines, f"(none in this run: it takes {plan.package}, an earlier run's package, whose report has the "
                        "settings it was built with)"]
    return [*lines, "(none: the recipe's own)"]


def _package_steps(package: dict) -> list[str]:
    """package.py's steps, as package.json records them."""
    steps = package.get("steps", {})
    lines = ["", "## package.py", "", f"- machine: {package.get('machine', {})}",
             f"- CUDA {package.get('cuda')}, Python {package.get('python')}",
             f"- started with: {package.get('started_with')}", "", "| step | ok | seconds |", "|---|---|---|"]
    lines += [f"| {name} | {step.get('ok')} | {step.get('seconds')} |" for name, step in steps.items()]
    for name, step in steps.items():
        if step.get("error"):
            lines += ["", f"{name}: {step['error']}"]
    if "diff" in steps.get("recipe", {}):
        lines += ["", "The device's copy of the recipe:", "", "```diff", steps["recipe"]["diff"].rstrip(), "```"]
    for built in package.get("packages", []):
        lines += ["", f"## {built['file']}", "", f"- {built['bytes']} bytes", f"- depends: {built['depends']}",
                  f"- constrains: {built['constrains']}", f"- {len(built['files'])} files:"]
        lines += [f"  - `{f}`" for f in built["files"][:60]]
    for name, step in steps.items():
        if name.startswith("build"):
            lines += ["", f"## rattler-build's linking checks ({name})", ""]
            lines += [f"    {line}" for line in step.get("linking", [])] or ["(none reported)"]
        for result in step.get("results", []) if name.startswith("tests") else []:
            lines += ["", f"## {name}, test {result['index']}: {'passed' if result['success'] else 'FAILED'} in "
                      f"{result.get('seconds')} s", "", "```", result["output"][-2500:].rstrip(), "```"]
    install = steps.get("install", {})
    if install:
        lines += ["", "## A user's environment", "", f"- packages: {install.get('packages')}"]
        for name, status in install.get("runs", {}).items():
            lines += ["", f"{name}: exit {status}", "```", install["logs"][name].rstrip(), "```"]
    for name, features in steps.get("operator suites", {}).get("gpu_features", {}).items():
        lines += ["", f"GPU features in the environment of {name}: exit {features['exit']}", "```",
                  features["log"].rstrip(), "```"]
    speed = steps.get("speed", {})
    if speed:
        lines += ["", "## Speed", "", (speed.get("table") or "(no table)").rstrip()]
        for side, summary in speed.get("hot", {}).items():
            lines += ["", f"### Where {side}'s host time goes in a run of the chain (py-spy)", "", summary.rstrip()]
        statuses = speed.get("runs", {}) | speed.get("findings", {})
        for name, log in speed.get("logs", {}).items():
            lines += ["", f"{name}: exit {statuses[name]}", "```", log.rstrip(), "```"]
    return lines


def _operator_suites(plan: Plan, top: Path) -> list[str]:
    """Upstream's operator suite per run: its counts, the cases whose outcome differs between runs, and each
    failing case with its message."""
    runs = plan.operator_suite.runs
    suites = {run.name: case_outcomes(log) for run in runs if (log := top / "results" / f"{run.name}.cases").exists()}
    source = top / "work" / "suite" / plan.operator_suite.path
    contrib = contrib_cases(source) if source.exists() else set()
    lines = ["", "## Upstream's operator suite per core", "",
             "| run | core | cuDNN | passed | failed | skipped | com.microsoft cases passed |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        core = f"{run.core} ({'this feedstock' if run.feedstock_core else 'PyPI'})"
        if run.name not in suites:
            lines.append(f"| {run.name} | {core} | {'yes' if run.cudnn else 'hidden'} | not run | | | |")
            continue
        outcomes = suites[run.name]
        counts = {k: sum(1 for o, _ in outcomes.values() if o == k) for k in ("passed", "failed", "skipped")}
        ms = [o for name, (o, _) in outcomes.items() if name.rsplit(".", 1)[-1] in contrib]
        lines.append(f"| {run.name} | {core} | {'yes' if run.cudnn else 'hidden'} | {counts['passed']} "
                     f"| {counts['failed']} | {counts['skipped']} | {ms.count('passed')} of {len(ms)} |")
    names = sorted(set().union(*suites.values()))
    differing = [n for n in names if len({suites[r].get(n, ('absent', ''))[0] for r in suites}) > 1]
    lines += ["", f"Cases whose outcome differs between runs: {len(differing)} of {len(names)}", ""]
    for name in differing:
        lines.append(f"- {name}: " + "; ".join(f"{r}: {suites[r].get(name, ('absent', ''))[0]}" for r in suites))
    for run, outcomes in suites.items():
        failing = sorted((name, message) for name, (outcome, message) in outcomes.items() if outcome == "failed")
        if failing:
            lines += ["", f"Failing in {run}:", ""] + [f"- {name}: {message}" for name, message in failing]
    return lines


def report(top: Path) -> str:
    """report.md's text, from the plan and what the run left in TOP/results."""
    results, plan = top / "results", load(top / "stage" / "plan.json")
    # the outputs the plan builds (none: it installs earlier runs' packages)
    built = ", ".join(plan.outputs) or f"nothing built ({plan.package} installed)"
    jobs = ", ".join(Path(job.file).stem for job in plan.jobs)
    lines = [f"# GPU run ({plan.purpose}): {built}, {plan.version}, linux-64 (jobs {jobs})", "",
             f"- machine: {_command('nvidia-smi', '-L')}; {_command('nproc')} cores",
             f"- driver: {_command('nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader')}"]
    lines += _overrides(plan) + _run_steps(results)
    package = results / "package.json"
    if package.exists():
        lines += _package_steps(json.loads(package.read_text()))
    if plan.operator_suite is not None:
        lines += _operator_suites(plan, top)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    top = Path(argv[0])
    text = report(top)
    (top / "results" / "report.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
