"""The MSCCL++ plan reader and printer on every real plan of the shared corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from collc.backends.mscclpp import parse_plan, read_plan, write_plan
from collc.compiler.mscclpp.plan import PlanError
from tests._plan_corpus import name as rel
from tests._plan_corpus import plan_params

# Plans whose JSON the executor's reader itself rejects (see docs/mscclpp.md).
UNREADABLE = {
    "more/repo_execution-files_allreduce_pipeline.json":
        "plan.gpus[0].channels[0]: missing key 'buffer_type'",
}
# Written by the DSL's to_json() without a final newline.
NO_FINAL_NEWLINE = {"more/dsl_da_reducescatter_4gpu_tbg1.json"}


@pytest.mark.parametrize("path", plan_params())
def test_corpus_plan_round_trips(path: Path) -> None:
    name = rel(path)
    if name in UNREADABLE:
        with pytest.raises(PlanError, match=UNREADABLE[name].replace("[", r"\[").replace("]", r"\]")):
            read_plan(path)
        return
    plan = read_plan(path)
    text = write_plan(plan)
    assert read_plan(text) == plan
    raw = path.read_text(encoding="utf-8")
    # byte-identical to the DSL's output: same key order, same layout
    assert text == (raw + "\n" if name in NO_FINAL_NEWLINE else raw)
    assert write_plan(read_plan(text)) == text


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ("[]", "plan: expected a JSON object"),
    ('{"name": "x"}', "missing key 'collective'"),
    ('{"name": "x", "collective": "allreduce", "protocol": "LL128", "inplace": true, "gpus": []}',
     "plan.protocol: unknown value \"LL128\""),
    ('{"name": "x", "collective": "allreduce", "protocol": "LL", "inplace": 1, "gpus": []}',
     "plan.inplace: expected true or false"),
    ('{"name": "x", "collective": "allreduce", "protocol": "LL", "inplace": true, "gpus": [{"id": 0, '
     '"input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0, "channels": [], "remote_buffers": [], '
     '"threadblocks": [{"id": 0, "channels": [], "ops": [{"name": "send"}]}]}]}',
     r"plan.gpus\[0\].threadblocks\[0\].ops\[0\].name: unknown value \"send\""),
    ('{"name": "x", "collective": "allreduce", "protocol": "LL", "inplace": true, "gpus": [{"id": 0, '
     '"input_chunks": -1, "output_chunks": 1, "scratch_chunks": 0, "channels": [], "remote_buffers": [], '
     '"threadblocks": []}]}',
     r"plan.gpus\[0\].input_chunks: expected a non-negative integer"),
])
def test_malformed_plans_give_one_line(text: str, message: str) -> None:
    with pytest.raises(PlanError, match=message) as e:
        parse_plan(text)
    assert "\n" not in str(e.value)


def test_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read"):
        read_plan(tmp_path / "absent.json")
