"""The ``nrp`` command: a thin shell over the library API (every subcommand calls one function)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from nrp import __version__
from nrp.errors import NrpError


def _indexes_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--indexes",
        metavar="DIR",
        default=None,
        help="folder of built collections and caches (default: $NRP_INDEXES or ./indexes)",
    )


def _executor_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where work runs: local (this process, default) or ray (a Ray cluster: per-query "
        "partitions on actors, results written here)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="Ray cluster address (host:port or auto; default: $RAY_ADDRESS, else a Ray "
        "instance started on this machine)",
    )


def _executor(args: argparse.Namespace):
    """The executor the options name, as a context manager (None for local)."""
    from contextlib import nullcontext

    from nrp.executors import make_executor

    executor = make_executor(args.executor, args.ray_address)
    return nullcontext() if executor is None else executor


def _report_executor(executor: object) -> None:
    for stats in getattr(executor, "history", []):
        print(f"{stats.executor}: {stats.task}: {stats.partitions} partition(s) on "
              f"{len(stats.workers)} worker(s) in {stats.wall_seconds:.1f} s; "
              f"{stats.resubmitted} re-sent, {stats.workers_lost} worker(s) lost",
              file=sys.stderr)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nrp",
        description="Score generated answers by where a validated ranker puts them among "
        "human-judged documents (Normalized Rank Position).",
    )
    parser.add_argument("--version", action="version", version=f"nrp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ingest = commands.add_parser("ingest", help="build a collection store from a manifest")
    ingest.add_argument("manifest", type=Path, help="collection manifest (YAML or TOML)")
    ingest.add_argument("--name", help="collection name (default: the manifest's name)")
    ingest.add_argument(
        "--data-root", type=Path, help="folder the manifest's paths are relative to"
    )
    ingest.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    _indexes_arg(ingest)
    ingest.set_defaults(run=_ingest)

    collections = commands.add_parser("collections", help="list built collections")
    _indexes_arg(collections)
    collections.set_defaults(run=_collections)

    info = commands.add_parser("info", help="counts, label histograms and |D_q| of a collection")
    info.add_argument("name")
    info.add_argument("--json", action="store_true", help="print JSON instead of tables")
    _indexes_arg(info)
    info.set_defaults(run=_info)

    formats = commands.add_parser("formats", help="list input formats and their options")
    formats.set_defaults(run=_formats)

    rankers = commands.add_parser("rankers", help="list rankers, their backends and parameters")
    rankers.set_defaults(run=_rankers)

    validate = commands.add_parser(
        "validate",
        help="score rankers (or external run files) by nDCG@10, MAP, bpref per dimension "
        "and choose the best ranker per dimension",
    )
    validate.add_argument("collection")
    source = validate.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--rankers", help="comma-separated ranker specs, e.g. tfidf,dph,bm25,dense,random"
    )
    source.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="TREC run files (qid Q0 docno rank score tag) or CSV/TSV (qid, docno, score)",
    )
    validate.add_argument(
        "--labels",
        choices=("graded", "raw"),
        default="graded",
        help="graded: the label scales' gains, 'could not judge' labels left out (default); "
        "raw: labels as written (what the source study's scripts used)",
    )
    validate.add_argument("--dimensions", help="comma-separated dimensions (default: all)")
    validate.add_argument(
        "--test",
        choices=("randomization", "t"),
        default="randomization",
        help="paired significance test (default: randomization)",
    )
    validate.add_argument(
        "--correction",
        choices=("holm", "bonferroni", "none"),
        default="holm",
        help="multiple-testing correction (default: holm)",
    )
    validate.add_argument(
        "--ci",
        choices=("t", "bootstrap"),
        default="t",
        help="95%% confidence interval of the mean (default: t)",
    )
    validate.add_argument("--no-cache", action="store_true", help="do not use the score cache")
    validate.add_argument(
        "--out",
        type=Path,
        help="where to write the JSON that later steps read "
        "(default: INDEXES/COLLECTION/validation.json)",
    )
    _indexes_arg(validate)
    _executor_args(validate)
    validate.set_defaults(run=_validate)

    score = commands.add_parser(
        "score", help="NRP of generated answers: rank each among its query's judged documents"
    )
    score.add_argument("collection")
    score.add_argument(
        "answers",
        type=Path,
        help="answer set: JSONL/CSV/TSV/Parquet (answer_id, llm, prompt, qid, sample, text) or "
        "the wide layout <llm>/<prompt>.csv (qid, query, answer1..answerN): file or folder",
    )
    chooser = score.add_mutually_exclusive_group(required=True)
    chooser.add_argument(
        "--validation", type=Path, help="validation JSON: each dimension's chosen ranker"
    )
    chooser.add_argument(
        "--ranker",
        action="append",
        metavar="DIM=SPEC",
        help="ranker for a dimension (repeat), or SPEC for every dimension",
    )
    score.add_argument("--out", type=Path, required=True, help="folder for results.parquet/.csv")
    score.add_argument(
        "--ties",
        choices=("mid", "optimistic", "pessimistic", "strict"),
        default="mid",
        help="how documents tied with the answer count (default mid)",
    )
    score.add_argument(
        "--frozen-stats",
        action="store_true",
        help="lexical rankers keep D_q's statistics (default: answer added to them)",
    )
    score.add_argument(
        "--full-rerank",
        action="store_true",
        help="reference mode: re-rank D_q plus the answer from scratch per answer",
    )
    score.add_argument(
        "--weight",
        action="append",
        metavar="DIM=W",
        help="weight of a dimension in the combined NRP (default: equal)",
    )
    score.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and list) answers with an unknown qid or empty text",
    )
    score.add_argument("--no-cache", action="store_true", help="do not use the caches")
    _indexes_arg(score)
    _executor_args(score)
    score.set_defaults(run=_score)

    summary = commands.add_parser(
        "summary", help="mean NRP per LLM x prompt with bootstrap CIs, saturation, paired tests"
    )
    summary.add_argument("results", type=Path, help="results folder or results.parquet/.csv")
    summary.add_argument("--out", type=Path, help="folder for summary.json and CSV tables")
    summary.set_defaults(run=_summary)

    agree = commands.add_parser(
        "agreement",
        help="leave-one-out: how far NRP agrees with the human grades of the judged documents",
    )
    agree.add_argument("collection")
    agree.add_argument("--rankers", required=True, help="comma-separated ranker specs")
    agree.add_argument("--labels", choices=("graded", "raw"), default="graded")
    agree.add_argument(
        "--ties", choices=("mid", "optimistic", "pessimistic", "strict"), default="mid"
    )
    agree.add_argument("--out", type=Path, help="folder for agreement.json and CSV tables")
    _indexes_arg(agree)
    agree.set_defaults(run=_agreement)

    evaluators = commands.add_parser(
        "evaluators", help="list evaluators beside NRP (by family) and their parameters"
    )
    evaluators.set_defaults(run=_evaluators)

    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate answers with BLEU, ROUGE, BERTScore, NRP, ... (one column per score)",
    )
    evaluate.add_argument("collection")
    evaluate.add_argument(
        "answers", type=Path, help="answer set, as for `nrp score` (file or folder)"
    )
    evaluate.add_argument(
        "--evaluators",
        required=True,
        metavar="SPECS",
        help="comma-separated evaluator specs, e.g. bleu,rouge,bertscore,nrp:rankers=tfidf "
        "(see `nrp evaluators`)",
    )
    evaluate.add_argument(
        "--out", type=Path, required=True, help="folder for evaluations.parquet/.csv"
    )
    evaluate.add_argument(
        "--references",
        choices=("auto", "collection", "pseudo", "none"),
        default="auto",
        help="what reference-based evaluators compare with: auto (the collection's reference "
        "answers, else pseudo-references: top-graded judged documents), collection, pseudo, "
        "none (default auto)",
    )
    evaluate.add_argument(
        "--pseudo-dimension",
        metavar="DIM",
        help="dimension whose top grade picks pseudo-references (default: the first)",
    )
    evaluate.add_argument(
        "--pseudo-k", type=int, default=3, help="pseudo-references per query (default 3)"
    )
    evaluate.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and list) answers with an unknown qid or empty text",
    )
    evaluate.add_argument(
        "--no-cache", action="store_true", help="do not use the per-item evaluation cache"
    )
    _indexes_arg(evaluate)
    _executor_args(evaluate)
    evaluate.set_defaults(run=_evaluate)
    meta = commands.add_parser(
        "meta",
        help="meta-evaluation: correlate score columns with human labels (Kendall tau-b, "
        "Spearman per query, pooled, per system) or check a judge's labels against them",
    )
    meta.add_argument(
        "scores",
        type=Path,
        help="score table: an `nrp evaluate` output folder, or CSV/TSV/JSONL/Parquet",
    )
    meta.add_argument(
        "human",
        type=Path,
        help="human labels: a table with the item id and label columns, or JSONL rankings "
        '{"qid": ..., "ranking": [ids, best first]}',
    )
    meta.add_argument("--scores", dest="score_columns", help="score columns (default: numeric)")
    meta.add_argument("--human", dest="human_columns", help="human label columns (default: all)")
    meta.add_argument("--join", default="answer_id", help="item id column (default answer_id)")
    meta.add_argument("--query-column", default="qid", help="query column (default qid)")
    meta.add_argument(
        "--system-column",
        default="auto",
        help="system column for system-level correlation (default: llm when present; none)",
    )
    meta.add_argument("--by", help="also report each value of this column (e.g. subset)")
    meta.add_argument(
        "--categorical", action="store_true", help="compare a judge's labels with human labels"
    )
    meta.add_argument("--label-column", help="the judge's label column (with --categorical)")
    meta.add_argument(
        "--confidence-column", help="the judge's confidence: review curve over thresholds"
    )
    meta.add_argument(
        "--thresholds", help="comma-separated confidence thresholds (default 0, 0.05, .., 1)"
    )
    meta.add_argument("--out", type=Path, help="folder for JSON, CSV tables and the review plot")
    meta.add_argument(
        "--bootstrap", type=int, default=2000, help="bootstrap resamples of queries (default 2000)"
    )
    meta.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    meta.set_defaults(run=_meta)
    serve = commands.add_parser(
        "serve", help="HTTP service: collections, scoring jobs, synchronous scores, leaderboard"
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument("--config", type=Path, help="settings file (YAML or TOML)")
    serve.add_argument(
        "--data-root",
        dest="data_roots",
        action="append",
        type=Path,
        metavar="DIR",
        help="folder requests may name files in (repeat); none: no server file can be named",
    )
    serve.add_argument("--store", metavar="URL", help="sqlite:///PATH or postgresql://...")
    serve.add_argument(
        "--tokens-file", type=Path, help="API tokens, one 'SCOPE TOKEN' line each (admin|read)"
    )
    serve.add_argument(
        "--no-auth", action="store_true", help="serve without tokens (local use only)"
    )
    serve.add_argument("--max-body-bytes", type=int, help="largest request body accepted")
    serve.add_argument(
        "--cors-origin",
        dest="cors_origins",
        action="append",
        metavar="ORIGIN",
        help="browser origin allowed by CORS (repeat; default: none, CORS off)",
    )
    serve.add_argument("--batch-max-size", type=int, help="answers per worker batch at most")
    serve.add_argument("--batch-max-wait-ms", type=float, help="wait for a batch to fill (ms)")
    # not _executor_args: its default (local) would override the config file's executor, and
    # without choices a bad value is the settings check's one-line error, as from the file
    serve.add_argument(
        "--executor",
        metavar="local|ray",
        help="where job units run: local (the worker process, default) or ray (a Ray cluster; "
        "the worker stays the only cache writer)",
    )
    serve.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="Ray cluster address for --executor ray (default: $RAY_ADDRESS, else a Ray "
        "instance started by the worker)",
    )
    _indexes_arg(serve)
    serve.set_defaults(run=_serve)
    report = commands.add_parser(
        "report",
        help="self-contained HTML report (PNG/SVG figures, CSV tables) of a results folder",
    )
    report.add_argument(
        "results",
        type=Path,
        help="results folder (results.parquet; optional validation.json, agreement.json, "
        "evaluations.parquet, sizes.csv/.yaml, meta/) or a results file",
    )
    report.add_argument("--out", type=Path, required=True, help="report folder (replaced)")
    report.add_argument("--validation", type=Path, help="validation JSON (nrp validate)")
    report.add_argument("--agreement", type=Path, help="agreement JSON (nrp agreement)")
    report.add_argument(
        "--evaluations", type=Path, help="evaluations table (nrp evaluate): Parquet or CSV"
    )
    report.add_argument(
        "--meta",
        type=Path,
        action="append",
        metavar="DIR",
        help="nrp meta output folder, or a CSV of evaluator x human dimension correlations "
        "(repeat for several)",
    )
    report.add_argument(
        "--sizes", type=Path, help="model sizes: CSV (llm,params_b) or YAML (llm: billions)"
    )
    report.add_argument("--title", help="page title (default: NRP report: COLLECTION)")
    report.add_argument("--seed", type=int, default=0, help="jitter and bootstrap seed (0)")
    report.set_defaults(run=_report)

    generate = commands.add_parser(
        "generate", help="generate answers with a local or OpenAI-compatible LLM (resumable)"
    )
    generate.add_argument("collection", help="collection name (its topics are the queries)")
    generate.add_argument(
        "--llm",
        default="local",
        help="LLM spec: local[:model=PATH_OR_HUB_ID,name=LABEL,device=auto,dtype=fp32] "
        "(default: the offline SmolLM2-135M), openai:model=NAME[,base_url=URL], or a model path",
    )
    generate.add_argument(
        "--prompts",
        default="none,short-qa,long-qa,multimedqa",
        help="comma-separated prompt strategies: none, short-qa, long-qa, multimedqa or a "
        "template file; NAME:chat sends it through the chat template (default: the study's four)",
    )
    generate.add_argument("--samples", type=int, default=10, help="answers per query and prompt")
    generate.add_argument(
        "--out", type=Path, required=True, help="answers file (.jsonl, .parquet or .csv)"
    )
    generate.add_argument("--max-new-tokens", type=int, default=512)
    generate.add_argument("--temperature", type=float, default=0.75, help="0: greedy")
    generate.add_argument("--top-k", type=int, default=50)
    generate.add_argument("--top-p", type=float, default=0.95)
    generate.add_argument("--repetition-penalty", type=float, default=1.2)
    generate.add_argument("--seed", type=int, default=0, help="base seed of every answer's seed")
    generate.add_argument("--limit-queries", type=int, help="only the first N queries")
    generate.add_argument("--batch", type=int, help="answers per forward pass (local models)")
    _indexes_arg(generate)
    _executor_args(generate)
    generate.set_defaults(run=_generate)

    run = commands.add_parser(
        "run",
        help="run an experiment file: generate, validate, score, evaluate, summary, report "
        "(every step cached)",
    )
    run.add_argument("experiment", type=Path, help="experiment YAML file")
    _executor_args(run)
    run.set_defaults(run=_run)
    return parser


def _ingest(args: argparse.Namespace) -> int:
    from nrp.collection.build import ingest

    result = ingest(args.manifest, args.name, args.indexes, args.data_root, args.force)
    if result.rebuilt:
        print(f"built collection {result.name} at {result.path}")
    else:
        print(f"collection {result.name} is up to date (inputs unchanged); nothing to do")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _collections(args: argparse.Namespace) -> int:
    from nrp.collection.build import default_indexes_dir
    from nrp.collection.collection import Collection, list_collections

    names = list_collections(args.indexes)
    if not names:
        print(f"no collections in {args.indexes or default_indexes_dir()}")
        return 0
    root = Path(args.indexes or default_indexes_dir())
    for name in names:
        collection = Collection(root / name)
        counts = collection.meta.get("counts", {})
        dims = ", ".join(collection.dimensions)
        print(
            f"{name}\t{collection.meta.get('built_at')}\t{dims}\t"
            f"{counts.get('judgment lines read', 0):,} judgment lines"
        )
    return 0


def _info(args: argparse.Namespace) -> int:
    from nrp.collection.collection import Collection
    from nrp.collection.info import collection_info, render_info

    info = collection_info(Collection.load(args.name, args.indexes))
    print(json.dumps(info, indent=2) if args.json else render_info(info))
    return 0


def _formats(args: argparse.Namespace) -> int:
    from nrp.collection.formats import all_formats

    for fmt in all_formats().values():
        print(f"{fmt.name}: {fmt.description} [provides {', '.join(fmt.provides)}]")
        for key, option in fmt.options.items():
            required = "required" if option.required else f"default {option.default!r}"
            print(f"    {key} ({required}): {option.description}")
    return 0


def _rankers(args: argparse.Namespace) -> int:
    from nrp.rankers.registry import all_rankers

    for info in all_rankers().values():
        ok, reason = info.available()
        state = "available" if ok else f"not available: {reason}"
        print(f"{info.name} [{info.backend}] ({state}): {info.description}")
        for key, param in info.params.items():
            choices = f"; one of {', '.join(map(str, param.choices))}" if param.choices else ""
            print(
                f"    {key}={param.default!r} ({param.type.__name__}{choices}): {param.description}"
            )
    return 0


def _validate(args: argparse.Namespace) -> int:
    from nrp.collection.collection import Collection
    from nrp.validation import validate, validate_runs

    collection = Collection.load(args.collection, args.indexes)
    dimensions = args.dimensions.split(",") if args.dimensions else None
    options = dict(dimensions=dimensions, test=args.test, correction=args.correction, ci=args.ci)
    if args.runs:
        result = validate_runs(collection, args.runs, labels=args.labels, **options)
    else:
        with _executor(args) as executor:
            result = validate(
                collection, args.rankers, labels=args.labels, cache=not args.no_cache,
                progress=lambda line: print(line, file=sys.stderr), executor=executor, **options,
            )  # fmt: skip
            _report_executor(executor)
    out = args.out or collection.path / "validation.json"
    result.to_json(out)
    print(result.format())
    print(f"\nwrote {out}")
    return 0


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise NrpError(f"{what} {item!r} is not DIM=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def _read_answer_set(args: argparse.Namespace, collection: object):
    """``args.answers`` read against the collection; skipped rows listed on stderr."""
    from nrp.nrp.answers import read_answers

    answer_set = read_answers(args.answers, collection, skip_invalid=args.skip_invalid)
    for row in answer_set.skipped:
        print(f"skipped: {row}", file=sys.stderr)
    if answer_set.skipped:
        print(f"skipped {len(answer_set.skipped)} invalid answer(s)", file=sys.stderr)
    return answer_set


def _score(args: argparse.Namespace) -> int:
    from nrp.collection.collection import Collection
    from nrp.nrp.report_tables import write_aside
    from nrp.nrp.scoring import score_answers

    collection = Collection.load(args.collection, args.indexes)
    answer_set = _read_answer_set(args, collection)
    if args.validation:
        rankers: object = str(args.validation)
    elif len(args.ranker) == 1 and "=" not in args.ranker[0].split(":", 1)[0]:
        rankers = args.ranker[0]
    else:
        rankers = _pairs(args.ranker, "--ranker")
    weights = {k: float(v) for k, v in _pairs(args.weight, "--weight").items()} or None
    with _executor(args) as executor:
        results = score_answers(
            collection, answer_set.answers, rankers, ties=args.ties,
            frozen_stats=args.frozen_stats, full_rerank=args.full_rerank, weights=weights,
            cache=not args.no_cache, progress=lambda line: print(line, file=sys.stderr),
            executor=executor,
        )  # fmt: skip
        _report_executor(executor)
    args.out.mkdir(parents=True, exist_ok=True)
    write_aside(args.out / "results.parquet", lambda p: results.to_parquet(p, index=False))
    write_aside(args.out / "results.csv", lambda p: results.to_csv(p, index=False))
    note = results.attrs.get("note")
    if note:
        print(note)
    print(f"{results['answer_id'].nunique():,} answers scored; wrote {args.out}/results.parquet "
          f"and results.csv")  # fmt: skip
    return 0


def _summary(args: argparse.Namespace) -> int:
    from nrp.nrp.summary import summarize

    summary = summarize(args.results)
    print(summary.format())
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        summary.to_json(args.out / "summary.json")
        summary.to_csv(args.out)
        print(f"\nwrote {args.out}")
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from nrp.collection.collection import Collection
    from nrp.nrp.agreement import agreement

    collection = Collection.load(args.collection, args.indexes)
    result = agreement(
        collection, args.rankers, labels=args.labels, ties=args.ties,
        progress=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    print(result.format())
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result.to_json(args.out / "agreement.json")
        result.to_csv(args.out)
        print(f"\nwrote {args.out}")
    return 0


def _evaluators(args: argparse.Namespace) -> int:
    from nrp.evaluators.base import all_evaluators

    families: dict[str, list] = {}
    for info in all_evaluators().values():
        families.setdefault(info.family, []).append(info)
    for family, infos in families.items():
        print(f"{family}:")
        for info in infos:
            ok, reason = info.available()
            state = "available" if ok else f"not available: {reason}"
            print(f"  {info.name} ({state}): {info.description}")
            for key, param in info.params.items():
                choices = f"; one of {', '.join(map(str, param.choices))}" if param.choices else ""
                print(
                    f"      {key}={param.default!r} ({param.type.__name__}{choices}): "
                    f"{param.description}"
                )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from nrp.collection.collection import Collection
    from nrp.evaluators.run import evaluate_answers
    from nrp.nrp.report_tables import text_table, write_aside

    collection = Collection.load(args.collection, args.indexes)
    answer_set = _read_answer_set(args, collection)
    with _executor(args) as executor:
        table = evaluate_answers(
            collection, answer_set.answers, args.evaluators, references=args.references,
            pseudo_dimension=args.pseudo_dimension, pseudo_k=args.pseudo_k,
            cache=not args.no_cache, progress=lambda line: print(line, file=sys.stderr),
            executor=executor,
        )  # fmt: skip
        _report_executor(executor)
    args.out.mkdir(parents=True, exist_ok=True)
    write_aside(args.out / "evaluations.parquet", lambda p: table.to_parquet(p, index=False))
    write_aside(args.out / "evaluations.csv", lambda p: table.to_csv(p, index=False))
    kinds = table["reference_kind"].value_counts() if len(table) else {}
    print(f"{len(table):,} answers; references: {kinds.get('reference', 0):,} real, "
          f"{kinds.get('pseudo-reference', 0):,} pseudo, {kinds.get('', 0):,} none")  # fmt: skip
    rows = [
        [spec, f"{c['items']:,}", f"{c['computed']:,}", f"{c['from_cache']:,}",
         f"{c['items_with_missing_scores']:,}"]
        for spec, c in table.attrs.get("evaluators", {}).items()
    ]  # fmt: skip
    print(text_table(["evaluator", "items", "computed", "from cache", "missing"], rows))
    print(f"wrote {args.out}/evaluations.parquet and evaluations.csv")
    return 0


def _meta(args: argparse.Namespace) -> int:
    from nrp.meta.report import meta_from_files, write_meta

    def names(value: str | None) -> list[str] | None:
        return [v.strip() for v in value.split(",") if v.strip()] if value else None

    try:
        thresholds = [float(t) for t in names(args.thresholds)] if args.thresholds else None
    except ValueError:
        raise NrpError(f"--thresholds {args.thresholds!r} is not a list of numbers") from None
    system = None if args.system_column.lower() == "none" else args.system_column
    run = meta_from_files(
        args.scores, args.human, score_columns=names(args.score_columns),
        human_columns=names(args.human_columns), join=args.join,
        query_column=args.query_column or None, system_column=system, by=args.by,
        categorical=args.categorical, label_column=args.label_column,
        confidence_column=args.confidence_column, thresholds=thresholds,
        n_bootstrap=args.bootstrap, seed=args.seed,
    )  # fmt: skip
    print(run.format())
    if args.out:
        written = write_meta(run, args.out)
        print(f"\nwrote {', '.join(str(p) for p in written)}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from nrp.service.app import serve
    from nrp.service.config import load_config

    overrides = {
        "host": args.host, "port": args.port, "indexes": args.indexes,
        "data_roots": args.data_roots, "store": args.store, "tokens_file": args.tokens_file,
        "auth": False if args.no_auth else None, "max_body_bytes": args.max_body_bytes,
        "cors_origins": args.cors_origins, "batch_max_size": args.batch_max_size,
        "batch_max_wait_ms": args.batch_max_wait_ms, "executor": args.executor,
        "ray_address": args.ray_address,
    }  # fmt: skip
    serve(load_config(args.config, overrides))
    return 0


def _report(args: argparse.Namespace) -> int:
    from nrp.reports import build_report

    index = build_report(
        args.results, args.out, validation=args.validation, agreement=args.agreement,
        evaluations=args.evaluations, meta=args.meta, sizes=args.sizes, title=args.title,
        seed=args.seed, progress=lambda line: print(line, file=sys.stderr),
    )  # fmt: skip
    print(index)
    return 0


def _generate(args: argparse.Namespace) -> int:
    from nrp.generation.generate import generate_answers, parse_llm
    from nrp.llm.backends import GenerationOptions

    llm = args.llm
    if args.batch is not None:
        spec = parse_llm(llm)
        if spec.backend != "local":
            raise NrpError("--batch applies to local models only")
        llm = {**spec.params, "backend": "local", "batch": args.batch, "name": spec.label}
    options = GenerationOptions(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
    )  # fmt: skip
    with _executor(args) as executor:
        answers = generate_answers(
            args.collection, llm, args.prompts, args.samples, options, args.out,
            limit_queries=args.limit_queries, indexes=args.indexes,
            progress=lambda line: print(line, file=sys.stderr), executor=executor,
        )  # fmt: skip
        _report_executor(executor)
    counts = answers.attrs["counts"]
    print(f"{counts['answers']:,} answers: {counts['generated']:,} generated, "
          f"{counts['from_store']:,} already there, {counts['empty']:,} empty (left out); "
          f"wrote {args.out}")  # fmt: skip
    return 0


def _run(args: argparse.Namespace) -> int:
    from nrp.experiments.run import run_experiment

    with _executor(args) as executor:
        out = run_experiment(
            args.experiment, progress=lambda line: print(line, file=sys.stderr), executor=executor
        )
        _report_executor(executor)
    report = out / "report" / "index.html"
    print(report if report.is_file() else out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except NrpError as err:
        print(f"nrp: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nrp: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
