"""Logs written by the evaluation tools themselves, for the format adapters' tests.

Inspect AI and lm-evaluation-harness run for real against a loopback OpenAI-compatible server
(``llama_cpp.server`` serving SmolLM2-135M, :func:`tests.engine_fixtures.running_llama_server`)
on :data:`PROBLEMS`, each in its own process (both tools import a lot, and Inspect reads its
settings from the environment). The chat-completion responses are the server's own replies,
written as a batch-API output file. Nothing is written by hand but the task definitions.

``python -m tests.tool_logs all OUT`` starts the server and runs every tool (this wrote
``tests/fixtures/tool_logs``); ``python -m tests.tool_logs inspect|lm-eval|openai BASE_URL OUT``
runs one against a server already running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Small arithmetic problems: (id, question, gold). SmolLM2-135M gets some right.
PROBLEMS: list[tuple[str, str, str]] = [
    ("add-1", "What is 2 + 3? Answer with the number only.", "5"),
    ("add-2", "What is 10 + 7? Answer with the number only.", "17"),
    ("mul-1", "What is 3 times 4? Answer with the number only.", "12"),
]
#: Output budget of every tool run: short enough for seconds, long enough for an answer. One
#: Inspect epoch runs with a budget of 4 tokens so that its outputs are cut (truncated).
MAX_TOKENS = 40
CUT_TOKENS = 4
REPO = Path(__file__).resolve().parents[1]


def run_tool(
    tool: str,
    base_url: str,
    out: Path,
    *,
    problems: int | None = None,
    max_tokens: int = MAX_TOKENS,
    timeout: int = 900,
) -> None:
    """Run one tool in a child process (offline), failing with its output; ``problems`` keeps
    the first few of :data:`PROBLEMS` and ``max_tokens`` is the output budget."""
    env = dict(os.environ)
    env.update(
        LEGIVAL_TOOL_PROBLEMS=str(problems or len(PROBLEMS)),
        LEGIVAL_TOOL_MAX_TOKENS=str(max_tokens),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        INSPECT_DISPLAY="none",
        INSPECT_LOG_DIR=str(out),
        # Inspect's openai-api provider reads <SERVICE>_API_KEY / _BASE_URL; the local server
        # needs no key, but the client wants one.
        LLAMA_API_KEY="none",
        LLAMA_BASE_URL=base_url,
        OPENAI_API_KEY="none",
        NO_COLOR="1",
        TQDM_DISABLE="1",
    )
    result = subprocess.run(
        [sys.executable, "-m", "tests.tool_logs", tool, base_url, str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{tool} run failed ({result.returncode}):\n{result.stderr[-4000:]}")


def _problems() -> list[tuple[str, str, str]]:
    return PROBLEMS[: int(os.environ.get("LEGIVAL_TOOL_PROBLEMS", len(PROBLEMS)))]


def _max_tokens() -> int:
    return int(os.environ.get("LEGIVAL_TOOL_MAX_TOKENS", MAX_TOKENS))


def _inspect(base_url: str, out: Path) -> None:
    """An Inspect task: the problems, plain generation, the ``match`` scorer; two epochs with
    the normal budget written as ``.eval`` and one epoch cut short written as ``.json``."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    def task() -> Task:
        samples = [Sample(id=p, input=question, target=gold) for p, question, gold in _problems()]
        return Task(dataset=samples, solver=generate(), scorer=match(numeric=True))

    model = "openai-api/llama/smollm2"
    common = {"model": model, "model_base_url": base_url, "display": "none", "seed": 0}
    common.update(temperature=0.0, max_connections=1, log_dir=str(out))
    eval(task(), epochs=2, max_tokens=_max_tokens(), log_format="eval", **common)
    eval(task(), epochs=1, max_tokens=CUT_TOKENS, log_format="json", **common)


_LM_EVAL_TASK = """\
task: legival_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: {max_tokens}
  do_sample: false
  temperature: 0.0
filter_list:
  - name: first-number
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
        group_select: 0
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def _lm_eval(base_url: str, out: Path) -> None:
    """lm-eval's own command line on a task of the problems (a local JSON dataset), through
    its ``local-chat-completions`` model against the server, with ``--log_samples``."""
    tasks = out / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    data = tasks / "arith.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": p, "question": q, "answer": g}) + "\n" for p, q, g in _problems()
        ),
        encoding="utf-8",
    )
    (tasks / "legival_arith.yaml").write_text(
        _LM_EVAL_TASK.format(data=data, max_tokens=_max_tokens()), encoding="utf-8"
    )
    model_args = (
        f"model=smollm2,base_url={base_url}/chat/completions,num_concurrent=1,max_retries=1,"
        "tokenized_requests=False"
    )
    command = [
        sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
        "--model_args", model_args, "--tasks", "legival_arith", "--include_path", str(tasks),
        "--apply_chat_template", "--log_samples", "--output_path", str(out / "results"),
        "--seed", "0",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=800)
    if result.returncode != 0:
        raise SystemExit(f"lm_eval failed: {result.stderr[-4000:]}")


def _openai(base_url: str, out: Path) -> None:
    """The server's own chat-completion replies to the problems, written as a batch-API
    output file (one ``{custom_id, response: {status_code, body}}`` line per request, the
    problem's id as ``custom_id``) beside the problems file they answer."""
    import httpx

    lines = []
    for number, (pid, question, _) in enumerate(_problems()):
        body = {
            "model": "smollm2",
            "messages": [{"role": "user", "content": question}],
            "max_tokens": _max_tokens() if number else CUT_TOKENS,  # the first one is cut short
            "temperature": 0.0,
            "seed": 0,
        }
        reply = httpx.post(f"{base_url}/chat/completions", json=body, timeout=300)
        reply.raise_for_status()
        lines.append(
            {
                "id": f"batch_req_{number}",
                "custom_id": pid,
                "response": {"status_code": 200, "request_id": f"r{number}", "body": reply.json()},
                "error": None,
            }
        )
    path = out / "batch_output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    problems = out / "problems.jsonl"  # for `datasets local` before the batch is ingested
    problems.write_text(
        "".join(
            json.dumps({"id": p, "question": q, "answer": g}) + "\n" for p, q, g in _problems()
        ),
        encoding="utf-8",
    )


TOOLS = {"inspect": _inspect, "lm-eval": _lm_eval, "openai": _openai}


def write_all(out: Path) -> None:
    """Every tool's files under ``out`` (``inspect/``, ``lm_eval/``, ``openai/``), against a
    server started here: how ``tests/fixtures/tool_logs`` was made."""
    from precompute.models import smollm2_gguf_path
    from tests.engine_fixtures import running_llama_server

    with running_llama_server(smollm2_gguf_path(), interrupt_requests=False) as base_url:
        for tool in TOOLS:
            run_tool(tool, base_url, out / tool.replace("-", "_"))


def main(argv: list[str]) -> int:
    if argv[0] == "all":
        write_all(Path(argv[1]))
        return 0
    tool, base_url, out = argv[0], argv[1], Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    TOOLS[tool](base_url, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
