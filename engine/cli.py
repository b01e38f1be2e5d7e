"""The engine's ``polis`` commands: run, status, estimate, query, sim-llm, spec-schema (``serve`` is ``polis.cli``'s)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.cli_output import dashboard_line, local_models_line, print_summary, print_sweep, progress_printer
from engine.errors import PolisError, SpecError
from engine.run_status import RunStatus
from engine.spec import BudgetSpec
from engine.storage.run_layout import resolve_location, run_name

__all__ = ["at_least", "build_parser", "main", "port_number", "run_command", "with_max_calls"]


def _load_run_spec(args: argparse.Namespace, run_dir: Path | str):
    from engine.society.run.extend import stored_spec
    from engine.spec import load_spec

    if (args.config is None) != (args.steps is None):
        raise SpecError("--config and --steps go together (the reference format's init_config.json and steps.yaml)")
    if args.config is not None:
        if args.spec is not None:
            raise SpecError("give either a SPEC or --config/--steps, not both")
        from engine.reference import ReferenceSettings, load_reference

        return ReferenceSettings().apply(load_reference(args.config, args.steps, name=run_name(run_dir)))
    if args.spec is None and not args.resume:
        raise SpecError("give a SPEC (or --config and --steps), or --resume to continue the run in --run-dir")
    spec = load_spec(args.spec) if args.spec else stored_spec(run_dir)
    if args.add_steps is None:
        return spec
    if not args.resume:
        raise SpecError("--add-steps goes with --resume RUN_DIR: it appends steps to a stored run")
    from engine.society.run.extend import extend_spec, load_steps

    return extend_spec(spec, load_steps(args.add_steps))


def _stop_on_signals(task: asyncio.Task) -> None:
    """SIGINT / SIGTERM cancel the run: in-flight batches are cancelled, the status becomes
    ``cancelled`` and the cluster shuts down. A second signal takes the default action."""
    loop = asyncio.get_running_loop()

    def stop(sig: signal.Signals) -> None:
        print(f"\npolis: {sig.name}: stopping (status will be '{RunStatus.CANCELLED}'; resume with --resume)", file=sys.stderr)
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(s)
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)


def with_max_calls(spec: Any, max_calls: int) -> Any:
    """``spec`` with its call cap set to ``max_calls`` and its token and cost caps kept (``--max-calls``)."""
    budget = spec.budget.model_copy(update={"max_calls": max_calls}) if spec.budget is not None else BudgetSpec(max_calls=max_calls)
    return spec.model_copy(update={"budget": budget})


async def _run(args: argparse.Namespace) -> int:
    from engine.failpoints import arm_process_group
    from engine.settings import EngineSettings
    from engine.society.run.runner import run_experiment
    from engine.society.shells import open_shell

    if args.fork_from is not None:
        return await _fork(args)
    if args.at_step is not None:
        raise SpecError("--at-step goes with --fork-from RUN_DIR")
    if isinstance(args.resume, str):  # polis run --resume RUN_DIR
        if args.run_dir not in (None, args.resume):
            raise SpecError(f"--resume {args.resume} and --run-dir {args.run_dir} name different runs")
        args.run_dir, args.resume = args.resume, True
    if args.run_dir is None:
        raise SpecError("give --run-dir (or --resume RUN_DIR)")
    run_dir = resolve_location(args.run_dir)
    spec = _load_run_spec(args, run_dir)
    if args.overwrite and args.resume:
        raise SpecError("--overwrite replaces a stored run and --resume continues it: give one")
    if not args.resume:
        from engine.society.run.target import claim_run_target

        claim_run_target(run_dir, overwrite=args.overwrite)  # before the cluster: a used folder is refused at once
    if args.batch_size:
        spec = spec.model_copy(update={"batch_size": args.batch_size})
    if args.max_calls is not None:
        spec = with_max_calls(spec, args.max_calls)
    settings = EngineSettings()
    options = {
        "resume": args.resume, "force": args.force, **settings.run_options(),
        "llm_cache_dir": Path(args.llm_cache).resolve() if args.llm_cache else None,
    }
    reference = _reference_run(args, run_dir, settings, options)
    arm_process_group()
    current = asyncio.current_task()
    assert current is not None
    _stop_on_signals(current)
    show = progress_printer()
    if settings.scheduler is None:  # a LocalCluster takes seconds to start, before the run's first report
        show(_starting_cluster(spec))
    try:
        async with open_shell(settings.scheduler, **settings.cluster_options()) as shell:
            experiment_id = run_name(run_dir)  # the run's span and the name its task keys carry
            show.note(await dashboard_line(shell, experiment_id))
            if line := local_models_line(spec, shell):
                show.note(line)
            if not args.resume and not args.force:
                from engine.society.run.estimate import refuse_over_budget

                await refuse_over_budget(spec, shell)
            if spec.sweep is not None:
                from engine.society.run.sweep import run_sweep

                if isinstance(run_dir, str):
                    raise SpecError(f"sweep: a sweep's root is a local directory for now, not {run_dir}")
                show.end()  # a sweep prints its cells, not a progress line
                sweep = await run_sweep(spec, run_dir, shell, experiment_id=experiment_id, **options)
                return print_sweep(sweep, run_dir)
            summary = await run_experiment(spec, run_dir, shell, on_progress=show, experiment_id=experiment_id, **options)
    except PolisError:
        if reference:
            reference(RunStatus.FAILED, spec, None)
        raise
    except asyncio.CancelledError:
        show.end()
        if reference:
            reference(RunStatus.CANCELLED, spec, None)
        print(f"status: {RunStatus.CANCELLED}")
        print(f"resume with: polis run --resume {run_dir}")
        return 130
    finally:
        show.end()
    if reference:
        reference(summary.status, spec, summary)
    return print_summary(summary)


def _starting_cluster(spec: Any) -> Any:
    """The progress report shown while the LocalCluster starts (a sweep's totals: 0, its cells not expanded yet)."""
    from engine.run_progress import Phase, RunPhase, RunProgress

    ticks = spec.total_ticks() if spec.sweep is None else 0
    steps = ticks * len(spec.all_agents()) if spec.sweep is None else 0
    return RunProgress(RunStatus.STARTING, 0, ticks, 0, steps).with_phase(Phase(RunPhase.STARTING_CLUSTER))


async def _fork(args: argparse.Namespace) -> int:
    """``polis run [PATCH] --fork-from PARENT --at-step K --run-dir NEW``: fork, then run the fork's remaining steps."""
    from engine.settings import EngineSettings
    from engine.society.fork.materialize import plan_fork
    from engine.society.fork.run import fork_experiment, load_patch
    from engine.society.shells import open_shell

    if args.at_step is None or args.run_dir is None:
        raise SpecError("--fork-from needs --at-step K (the parent's committed tick) and --run-dir NEW")
    if args.resume or args.config or args.steps or args.add_steps:
        raise SpecError("--fork-from starts a new run: it does not go with --resume, --config/--steps or --add-steps "
                        "(give a spec patch instead)")
    patch = load_patch(args.spec) if args.spec else None
    if args.batch_size or args.max_calls is not None:
        patch = dict(patch or {})
        if args.batch_size:
            patch["batch_size"] = args.batch_size
        if args.max_calls is not None:
            patch["budget"] = {**(patch.get("budget") or {}), "max_calls": args.max_calls}
    parent = resolve_location(args.fork_from)
    plan_fork(parent, args.at_step, patch)  # a bad patch or tick is refused before a cluster starts
    settings = EngineSettings()
    run_dir = resolve_location(args.run_dir)
    options = {**settings.run_options(), "llm_cache_dir": Path(args.llm_cache).resolve() if args.llm_cache else None}
    current = asyncio.current_task()
    assert current is not None
    _stop_on_signals(current)
    try:
        async with open_shell(settings.scheduler, **settings.cluster_options()) as shell:
            print(await dashboard_line(shell, run_name(run_dir)), file=sys.stderr)
            made, summary = await fork_experiment(parent, args.at_step, run_dir, shell, patch=patch,
                                                  on_progress=progress_printer(), experiment_id=run_name(run_dir), **options)
    except asyncio.CancelledError:
        print(f"status: {RunStatus.CANCELLED}")
        print(f"resume with: polis run --resume {run_dir}")
        return 130
    print(f"fork of {args.fork_from} at tick {args.at_step}: {made.agents} workspaces ({made.workspace_bytes} bytes) copied, "
          f"{made.linked_files} files linked in {made.seconds:.2f} s")
    return print_summary(summary)


def _reference_run(args: argparse.Namespace, run_dir: Path | str, settings: Any, options: dict[str, Any]) -> Any:
    """For a run from the reference's files (or resuming one): apply its ``AGENTSOCIETY_*`` limits and
    home, write ``pid.json`` now, and return what records the end (``pid.json``, the reference's outputs); else None."""
    from engine.reference import ReferenceSettings
    from engine.reference.outputs import PID_FILE, write_pid_file, write_reference_outputs
    from engine.society.status import has_society_step
    from engine.storage.run_layout import RunLayout

    if isinstance(run_dir, str):
        if args.config is not None:
            raise SpecError(f"a run from the reference's files is kept in a local directory, not {run_dir}")
        return None
    if args.config is None and not (run_dir / PID_FILE).exists():
        return None
    if not args.resume and has_society_step(run_dir):
        return None  # the runner refuses the directory; its pid.json belongs to the run already there
    ref = ReferenceSettings()
    options.update(llm_limits=ref.limiter_config(settings), template_cache_dir=ref.template_cache_dir(settings))
    for name in ref.unused():
        print(f"polis: {name} is set but not used: the template cache embeds with the spec's environment.embedder",
              file=sys.stderr)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_pid_file(run_dir, RunStatus.RUNNING)

    def finish(status: str, spec: Any, summary: Any) -> None:
        if summary is not None and RunLayout(run_dir).replay.exists():
            written = write_reference_outputs(run_dir, spec)
            print(f"reference outputs: {len(written) - 1} artifacts, {written[-1].name}, {PID_FILE}")
        write_pid_file(run_dir, status)

    return finish


def _status(args: argparse.Namespace) -> int:
    from engine.society.lease import effective_status, read_lease
    from engine.society.status import read_society, read_society_step
    from engine.storage.atomic import read_json
    from engine.storage.sweep_layout import SWEEP_FILE

    run_dir = resolve_location(args.run_dir)
    sweep = read_json(run_dir / SWEEP_FILE, default=None) if isinstance(run_dir, Path) else None
    if sweep is not None:
        for cell in sweep["cells"]:
            live = effective_status(run_dir / cell["run_dir"]) or RunStatus.PENDING
            print(f"{cell['cell_id']}: {live}  params={cell['params']}  replication={cell['replication']}  seed={cell['seed']}")
        return 0
    status = read_society_step(run_dir)
    if status is None:
        raise SpecError(f"{run_dir} holds no run (no SOCIETY_STEP.json)")
    lease = read_lease(run_dir) or {}
    print(f"status: {effective_status(run_dir)}" + (f" (last written: {status.status})" if status.status != effective_status(run_dir) else ""))
    print(f"ticks: {status.step_count}  top-level steps done: {status.completed_steps}  transactions: {status.txn}")
    print(f"simulated time: {status.current_time.isoformat()}")
    fork = (read_society(run_dir) or {}).get("fork")
    if fork:
        print(f"forked from: {fork['parent']} at tick {fork['at_step']}")
    if status.error:
        print(f"error: {status.error}")
    if lease:
        print(f"driver: pid {lease.get('pid')} on {lease.get('host')}, lease {'released' if lease.get('released') else 'held'}")
    return 0


async def _estimate(args: argparse.Namespace) -> int:
    from engine.settings import EngineSettings
    from engine.society.run.estimate import estimate
    from engine.society.shells import open_shell
    from engine.spec import load_spec

    spec = load_spec(args.spec)
    settings = EngineSettings()
    async with open_shell(settings.scheduler, **settings.cluster_options()) as shell:
        result = await estimate(spec, shell, agents=args.agents, ticks=args.ticks)
    print(result.report())
    return 0


def _query(args: argparse.Namespace) -> int:
    from engine.settings import EngineSettings
    from engine.society.run.target import require_run
    from engine.storage.reader import ReplayReader, format_table

    with ReplayReader(require_run(resolve_location(args.run_dir)), EngineSettings().query_limits()) as reader:
        if not args.sql:
            for name in reader.datasets():
                print(f"{name}: {reader.count(name)} rows")
            return 0
        print(format_table(reader.query(args.sql), max_rows=args.max_rows))
    return 0


def _fidelity(args: argparse.Namespace) -> int:
    from engine.fidelity import fidelity, rank_sweep, regression_fidelity, regression_spec
    from engine.storage.sweep_layout import read_sweep_manifest

    retest = {}
    for pair in args.retest:
        item, _, value = pair.partition("=")
        try:
            retest[item] = float(value)
        except ValueError:
            raise SpecError(f"--retest {pair!r}: give ITEM=ACCURACY, e.g. rate_marriage=0.8") from None
    location = resolve_location(args.run_dir)
    if isinstance(location, Path) and read_sweep_manifest(location) is not None:
        if args.regression is not None:
            raise SpecError("--regression fits one run's answers: give a cell of the sweep, not its root")
        ranking = rank_sweep(location, metric=args.rank_by, item=args.item, bootstrap=args.bootstrap, seed=args.seed)
        print(f"setups of the sweep ranked by {args.rank_by} (mean over replications; 95% interval)")
        for setup in ranking:
            ci = f"[{setup.ci_low:.3f}, {setup.ci_high:.3f}]" if setup.ci_low is not None and setup.ci_high is not None else ""
            value = "-" if setup.value is None else f"{setup.value:.3f}"
            print(f"{setup.rank:>3}. {value:>7} {ci:<17} x{setup.replications}  {setup.params}")
        print("each cell's figures: its fidelity dataset (the sweep's fidelity view has them all, by cell)")
        return 0
    if args.family is not None and args.regression is None:
        raise SpecError("--family needs --regression: it is the family of that regression")
    # The regression first: it is quick, and a formula that cannot be fitted is refused before minutes of resamples.
    regression = None if args.regression is None else regression_fidelity(
        location, regression_spec(args.regression, args.family or "ols"), questionnaire_id=args.questionnaire)
    report = fidelity(location, by=args.by, questionnaire_id=args.questionnaire,
                      bootstrap=args.bootstrap, seed=args.seed, retest=retest)
    print(report.text())
    print(f"written: the run's fidelity dataset ({args.bootstrap} bootstrap resamples, 95% intervals); "
          f"polis query {args.run_dir} \"SELECT * FROM fidelity\"")
    if regression is not None:
        print()
        print(regression.text())
        print(f"written: the run's regression_fidelity dataset; polis query {args.run_dir} "
              "\"SELECT * FROM regression_fidelity\"")
    return 0


def _sim_llm(args: argparse.Namespace) -> int:
    from engine.llm.sim import SimFaults, run_server

    faults = SimFaults(
        latency_ms=args.latency_ms, jitter_ms=args.jitter_ms, capacity=args.capacity, rate_429=args.rate_429,
        rate_500=args.rate_500, rate_hang=args.rate_hang, rate_malformed=args.rate_malformed, seed=args.seed,
    )
    run_server(args.host, args.port, name=args.name, seed=args.seed, faults=faults,
               served_model=args.served_model, fingerprint=args.fingerprint)
    return 0


def _workspace_export(args: argparse.Namespace) -> int:
    from engine.society.fork.as_of import export_agent

    written = export_agent(resolve_location(args.run_dir), args.agent, Path(args.dest), at_step=args.at_step)
    at = "as the run stands" if args.at_step is None else f"as tick {args.at_step} left it"
    print(f"agent {args.agent} {at}: {written} bytes written to {args.dest}")
    return 0


def _spec_schema(args: argparse.Namespace) -> int:
    from engine.spec_schema import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, Any]:
    """The engine's commands; returns the parser and its subcommand group, which ``polis.cli``
    extends with ``serve`` (the engine never imports the service)."""
    parser = argparse.ArgumentParser(prog="polis", description="LLM-agent social simulations on Dask")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an experiment spec (JSON or YAML)")
    run.add_argument("spec", nargs="?", default=None,
                     help="the spec; with --resume it defaults to the run's own; with --fork-from, a patch merged into the parent's")
    run.add_argument("--run-dir", default=None, help="where the run lands (required unless --resume RUN_DIR)")
    run.add_argument("--config", default=None, help="the reference format's init_config.json (with --steps)")
    run.add_argument("--steps", default=None, help="the reference format's steps.yaml (with --config)")
    run.add_argument("--batch-size", type=at_least(1), default=None)
    run.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN_DIR",
                     help="continue a run (or sweep) from its last committed tick and top-level step")
    run.add_argument("--force", action="store_true",
                     help="resume even though the spec changed; start although the upper estimate passes the budget")
    run.add_argument("--overwrite", action="store_true",
                     help="replace the run or sweep that --run-dir holds (without it, a used folder is refused)")
    run.add_argument("--add-steps", default=None, metavar="STEPS",
                     help="with --resume: append the questionnaire, ask or intervene steps in this YAML/JSON file "
                     "(a list, or {steps: [...]}) to the stored run and run them")
    run.add_argument("--fork-from", default=None, metavar="RUN_DIR",
                     help="start a new run (--run-dir) from RUN_DIR's state at --at-step, sharing its response cache")
    run.add_argument("--at-step", type=at_least(0), default=None, metavar="K", help="with --fork-from: the parent's committed tick")
    run.add_argument("--max-calls", type=at_least(0), default=None, help="set the call budget (e.g. raise it to resume)")
    run.add_argument("--llm-cache", default=None, help="response cache directory (default RUN_DIR/llm_cache)")
    run.set_defaults(handler=lambda a: asyncio.run(_run(a)))

    status = sub.add_parser("status", help="where a run stands (a crashed driver shows as 'crashed', never 'running')")
    status.add_argument("run_dir")
    status.set_defaults(handler=_status)

    est = sub.add_parser("estimate", help="project a spec's LLM calls and tokens from a short simulated run")
    est.add_argument("spec", help="the spec (JSON or YAML) to estimate")
    est.add_argument("--agents", type=at_least(1), default=20,
                     help="LLM agents the sample runs, spread over the population, with the network among them (default 20)")
    est.add_argument("--ticks", type=at_least(1), default=2, help="ticks of each run step the sample runs")
    est.set_defaults(handler=lambda a: asyncio.run(_estimate(a)))

    query = sub.add_parser("query", help="query a run's replay datasets with DuckDB SQL (SELECT only; "
                           "POLIS_QUERY_TIMEOUT_S, POLIS_QUERY_MEMORY_LIMIT and POLIS_QUERY_THREADS bound each query)")
    query.add_argument("run_dir")
    query.add_argument("sql", nargs="?", default=None, help="omit to list datasets")
    query.add_argument("--max-rows", type=at_least(1), default=40)
    query.set_defaults(handler=_query)

    fid = sub.add_parser("fidelity", help="score a survey run's simulated answers against the real ones "
                         "(distances, accuracy, subgroups, with bootstrap intervals) and write its fidelity dataset; "
                         "on a sweep's root, rank its setups by one metric")
    fid.add_argument("run_dir")
    fid.add_argument("--by", action="append", default=[], metavar="FIELD", help="also per subgroup of a persona field")
    fid.add_argument("--questionnaire", default=None, help="score this questionnaire (default: each item's last)")
    fid.add_argument("--bootstrap", type=at_least(0), default=200, help="resamples behind each interval")
    fid.add_argument("--seed", type=int, default=0)
    fid.add_argument("--retest", action="append", default=[], metavar="ITEM=ACCURACY",
                     help="people's test-retest accuracy on an item: adds item_normalized_accuracy")
    fid.add_argument("--regression", default=None, metavar="FORMULA",
                     help="also fit 'target ~ field + field + C(field)' on the real and on the simulated answers and "
                          "compare each coefficient (writes the regression_fidelity dataset)")
    fid.add_argument("--family", choices=("ols", "logit"), default=None,
                     help="the regression's: ols (WLS on the scale step, the default) or logit (a binary target)")
    fid.add_argument("--rank-by", default="accuracy", metavar="METRIC", help="a sweep: the metric its setups are ranked by")
    fid.add_argument("--item", default=None, help="a sweep: the target item to rank by (needed with several)")
    fid.set_defaults(handler=_fidelity)

    sim = sub.add_parser("sim-llm", help="serve the simulated LLM over OpenAI-compatible HTTP")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=port_number, default=8000)
    sim.add_argument("--name", default="default")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--latency-ms", type=float, default=0.0)
    sim.add_argument("--jitter-ms", type=float, default=0.0)
    sim.add_argument("--capacity", type=at_least(1), default=None)
    sim.add_argument("--rate-429", type=float, default=0.0)
    sim.add_argument("--rate-500", type=float, default=0.0)
    sim.add_argument("--rate-hang", type=float, default=0.0)
    sim.add_argument("--rate-malformed", type=float, default=0.0)
    sim.add_argument("--served-model", default=None, metavar="NAME",
                     help="name this model in every reply, whatever was requested (as a provider serving a snapshot)")
    sim.add_argument("--fingerprint", default=None, metavar="FP", help="the replies' system_fingerprint (default sim-SEED)")
    sim.set_defaults(handler=_sim_llm)

    workspace = sub.add_parser("workspace", help="an agent's workspace, whatever keeps it (packs or folders)")
    export = workspace.add_subparsers(dest="workspace_command", required=True).add_parser(
        "export", help="write one agent's workspace as a folder in AS2's layout")
    export.add_argument("run_dir")
    export.add_argument("agent", type=int, help="the agent's id")
    export.add_argument("dest", help="a new (or empty) folder")
    export.add_argument("--at-step", type=at_least(0), default=None, metavar="K", help="as kept tick K left it (default: as the run stands)")
    export.set_defaults(handler=_workspace_export)

    schema = sub.add_parser("spec-schema", help="print the experiment spec's JSON Schema")
    schema.set_defaults(handler=_spec_schema)
    return parser, sub


def at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``low`` (and at most ``high``): a count or a port the command
    would otherwise misuse silently."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value} is above {high}")
        return value

    return whole


#: An argparse type: a TCP port, 0 (any free one) to 65535.
port_number = at_least(0, 65535)


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command's handler; Polis errors become exit code 2."""
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except PolisError as error:
        print(f"polis: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polis: interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.cli``: every command but ``serve`` (the ``polis`` script is ``polis.cli``)."""
    return run_command(build_parser()[0], argv)


if __name__ == "__main__":
    sys.exit(main())
