"""The speed model against every Spark figure the seeds measured: the calibration table and its error.

For each measured row: the model, what was measured, the figure, the prediction with the factors fitted to every
row, the prediction with the factors fitted to every *other model's* rows (leave one model out), and that error.
Then the mean and largest leave-one-model-out error per kind of figure (the bands every plan carries), the fitted
factors, and the catalog's predicted single-stream decode. These are GB10 figures from the seeds, not measurements
of this machine.

  uv run python benchmarks/speed_calibration.py [--markdown]
"""

from __future__ import annotations

import argparse

from sparkfleet.catalog import load_catalog
from sparkfleet.planning import calibration, multinode
from sparkfleet.planning.catalogspeed import catalog_speed
from sparkfleet.planning.speed import ALLREDUCE_START_S


def what(row: calibration.Measurement) -> str:
    parts = [row.kind]
    if row.kind == "prefill":
        parts.append(f"{row.context:,}-token prompt")
    else:
        parts.append(f"{row.context:,} tokens in")
    if row.concurrency > 1:
        parts.append(f"{row.concurrency} streams")
    if row.eager:
        parts.append("eager")
    if row.method:
        parts.append(f"{row.method} n={row.drafts}")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    markdown = parser.parse_args().markdown
    sep = " | " if markdown else "  "
    head = ["model", "figure", "measured", "fitted", "held out", "error", "source"]
    print(("| " + " | ".join(head) + " |\n|" + "---|" * len(head)) if markdown else sep.join(head))
    for check in calibration.leave_one_model_out():
        row = check.row
        cells = [
            row.model,
            what(row),
            f"{row.value:,.1f}",
            f"{check.predicted:,.1f}",
            f"{check.held_out:,.1f}",
            f"{check.error:.0%}",
            row.source,
        ]
        print(("| " + " | ".join(cells) + " |") if markdown else sep.join(cells))
    print()
    by_kind: dict[str, list[float]] = {}
    for check in calibration.leave_one_model_out():
        by_kind.setdefault(check.row.kind, []).append(check.error)
    print("leave-one-model-out error per kind (rows, mean, largest):")
    for kind, errors in by_kind.items():
        print(f"  {kind:<12} {len(errors):>3}  {sum(errors) / len(errors):6.1%}  {max(errors):6.1%}")
    f = calibration.factors()
    print(
        f"\nfitted: bandwidth efficiency {f.bandwidth_efficiency:.3f} of 273 GB/s, per-step cost {f.step_s * 1e3:.2f} ms, "
        f"eager {f.eager_s_per_layer * 1e3:.3f} ms per layer, prefill {f.flops / 1e12:.1f} TFLOP/s effective "
        f"after {f.prefill_start_s * 1e3:.0f} ms"
    )
    print(
        "\ncatalog, predicted single-stream decode on a Spark, or on the Sparks its recipe names (1,024 tokens in, "
        "CUDA graphs, the recipe's KV dtype):"
    )
    for profile in load_catalog().values():
        band = catalog_speed(profile)
        shown = f"{band.value:6.1f} tok/s ({band.low:.1f}-{band.high:.1f})" if band else "not predicted"
        where = f" on {profile.layout.nodes} Sparks" if profile.layout else ""
        print(f"  {profile.id:<62} {shown}{where}")
    across = multinode.factors()
    print(
        "\nacross Sparks (tensor parallel, the ratio to one Spark; all-reduce start fitted "
        f"{across.allreduce_start_s * 1e6:.0f} us, nccl-tests' raw {ALLREDUCE_START_S * 1e6:.0f} us):"
    )
    for row in multinode.ROWS:
        predicted = multinode.predicted_ratio(row, across)
        print(
            f"  {row.model:<48} {row.nodes} Sparks c{row.concurrency:<3} measured {row.one_spark_tps:7.1f} -> "
            f"{row.spread_tps:7.1f} ({row.ratio:.2f}x)  predicted {predicted:.2f}x  {abs(predicted / row.ratio - 1):5.1%}"
        )
    print(
        f"  leave-one-model-out error of the ratio (multi-node, apart from the single-node kinds above): "
        f"{multinode.leave_one_model_out_error():.1%}"
    )
    print(
        f"\npipeline stages, checked not fitted ({multinode.PIPELINE_SOURCE}; the catalog's "
        f"{multinode.PIPELINE_STAND_IN} stands in for Qwen3.8-27B):"
    )
    for row in multinode.PIPELINE_ROWS:
        predicted = multinode.predicted_pipeline_ratio(row)
        print(
            f"  {row.nodes} stages c{row.concurrency:<3} measured {row.ratio:.3f}x  predicted {predicted:.2f}x  "
            f"{abs(predicted / row.ratio - 1):5.1%}"
        )
    print(f"  mean error, added to a pipeline plan's bands: {multinode.pipeline_error():.1%}")


if __name__ == "__main__":
    main()
