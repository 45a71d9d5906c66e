"""The first profiled cell of a new kernel: what it costs before and after the user's loop.

Each workload runs in a fresh Python process with a real IPython shell: ``%load_ext
gpuperf_magics``, a setup cell (the model), then a ``%%profile_training`` cell whose loop stamps
its first and last statement. Outside the loop the cell spends its time on imports, the store
check, the hooks, the FLOP count, hardware detection and the store write; the child times each
of those phases by wrapping the functions that do them as their modules load (exclusive times:
a phase nested in another is counted once, in itself). A second cell in the same process shows
what is left once everything is imported.

Two stores: a new file (the first save creates the schema) and an existing up-to-date store
(a user's usual case: a new kernel, a store of earlier runs). Each (workload, store) runs
``runs`` times; the table gives medians, the totals with their range.

    python benchmarks/overhead.py --first-cell-only [--runs 5] [--write]

Target (issue 19): a first cell adds at most 0.15 s before and after its loop.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The checkout whose package the children import (they run with it as the working folder).
ROOT = Path(__file__).resolve().parents[1]

#: Cells for the first-cell measurement: (label, setup cell, training cell). The training
#: cell's last statement stamps ``loop_end``.
FIRST_CELLS = {
    "mlp": ("MLP 256-512-512-10", """
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
""", """
for _ in range(20):
    opt.zero_grad(); nn.functional.cross_entropy(model(x), y).backward(); opt.step()
"""),
    "resnet": ("ResNet-18-like CNN, 3x64x64", """
def block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())
layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
for cin, cout, stride in ((64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)):
    layers += [block(cin, cout, stride), block(cout, cout, 1)]
model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 10, (2,))
""", """
for _ in range(4):
    opt.zero_grad(); nn.functional.cross_entropy(model(x), y).backward(); opt.step()
"""),
    "transformer": ("TransformerEncoder 2 layers, d=128, seq 64", """
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), 2)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(8, 64, 128)
""", """
for _ in range(10):
    opt.zero_grad(); model(x).pow(2).mean().backward(); opt.step()
"""),
    "lightning": ("Lightning Trainer.fit, the MLP", """
import lightning as L, logging, tempfile, warnings
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
warnings.filterwarnings("ignore")
class MLP(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    def training_step(self, batch, i):
        return nn.functional.cross_entropy(self.net(batch[0]), batch[1])
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)
model = MLP()
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
    torch.randn(640, 256), torch.randint(0, 10, (640,))), batch_size=64)
def trainer():
    return L.Trainer(max_steps=20, accelerator="cpu", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=tempfile.mkdtemp())
t = trainer()
""", """
t.fit(model, loader)
"""),
    "bert": ("Hugging Face Trainer, 2-layer BERT (hidden 64, seq 32)", """
import tempfile, transformers, warnings
warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()
cfg = transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=128,
                              max_position_embeddings=32, num_labels=2)
model = transformers.BertForSequenceClassification(cfg)
class Data(torch.utils.data.Dataset):
    def __len__(self): return 160
    def __getitem__(self, i):
        return {"input_ids": torch.randint(0, 1000, (32,)), "labels": torch.tensor(i % 2)}
def trainer():
    args = transformers.TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=10,
        per_device_train_batch_size=8, use_cpu=True, report_to="none", save_strategy="no",
        logging_strategy="no", disable_tqdm=True)
    return transformers.Trainer(model=model, args=args, train_dataset=Data())
t = trainer()
""", """
t.train()
"""),
}

#: The child process. argv: setup cell, training cell, threads, store path. Prints one JSON
#: object: ``load_ext`` (seconds), and per cell ("first", "second") the seconds before and
#: after the loop and the spans ``[phase, start, exclusive seconds]`` (start from the cell's
#: start).
CHILD = r"""
import importlib.abc, importlib.machinery, json, sys, time
SPANS = []  # [phase, start, exclusive seconds] of every timed call
STACK = []  # [phase, seconds of nested timed calls] of the calls in progress
WRAP = {  # module -> {attribute: phase}: wrapped when the module is first imported
    "gpuperf_magics.skins.magics": {"_check_store": "store"},
    "gpuperf_magics.capture.session": {
        "check_store": "store", "ProfileSession.__enter__": "hooks",
        "ProfileSession._keep": "timings", "fill_model": "FLOPs",
        "fill_hardware": "hardware", "ProfileSession._save": "store"},
}
def timed(fn, phase):
    def wrapper(*args, **kwargs):
        STACK.append([phase, 0.0])
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            SPANS.append([phase, start, spent - STACK.pop()[1]])
            if STACK:
                STACK[-1][1] += spent
    return wrapper
class Wrapping(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WRAP:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        execute = spec.loader.exec_module
        def exec_module(module):
            execute(module)
            for dotted, phase in WRAP[name].items():
                *owners, attr = dotted.split(".")
                owner = module
                for part in owners:
                    owner = getattr(owner, part)
                setattr(owner, attr, timed(getattr(owner, attr), phase))
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Wrapping())
import torch
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
setup, cell, threads, store = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
started = time.perf_counter()
shell.run_line_magic("load_ext", "gpuperf_magics")
out = {"load_ext": time.perf_counter() - started}
shell.run_cell("import time, torch\nfrom torch import nn\ntorch.set_num_threads(%d)\n" % threads
               + setup)
for key in ("first", "second"):
    if key == "second":
        shell.run_cell("t = trainer()" if "trainer" in shell.user_ns else "pass")
    SPANS.clear()
    started = time.perf_counter()
    result = shell.run_cell(f"%%profile_training -q --store {store}\n"
                            + "loop_start = time.perf_counter()\n" + cell
                            + "\nloop_end = time.perf_counter()\n")
    shown = time.perf_counter()
    if not result.success:
        raise SystemExit(f"cell failed: {result.error_in_exec!r}")
    out[key] = {"before": shell.user_ns["loop_start"] - started,
                "after": shown - shell.user_ns["loop_end"],
                "spans": [[p, s - started, t] for p, s, t in SPANS]}
print(json.dumps(out))
"""

#: The phases of each side, as the child names them; "other" is the rest of the side
#: (IPython running the nested cell, parsing the options, the printed line).
BEFORE = ("store", "hooks")
AFTER = ("timings", "FLOPs", "hardware", "store")


def run_children(setup: str, cell: str, threads: int, store: str | None,
                 runs: int) -> list[dict[str, Any]]:
    """``runs`` fresh processes; ``store`` None gives each a new store file."""
    results = []
    for _ in range(runs):
        path = store or os.path.join(tempfile.mkdtemp(prefix="gpuperf-first-cell-"),
                                     "runs.sqlite")
        proc = subprocess.run([sys.executable, "-c", CHILD, setup, cell, str(threads), path],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        if proc.returncode:
            raise RuntimeError(" ".join(proc.stderr.strip().splitlines()[-1:]))
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return results


def split(cell: dict[str, Any]) -> dict[str, dict[str, float]]:
    """A cell's time outside its loop by side and phase (a span goes to the side it started
    on), each side with its ``total`` and ``other``."""
    sides: dict[str, dict[str, float]] = {}
    for side, phases in (("before", BEFORE), ("after", AFTER)):
        own = dict.fromkeys(phases, 0.0)
        for phase, start, spent in cell["spans"]:
            if (start < cell["before"]) == (side == "before") and phase in own:
                own[phase] += spent
        own["other"] = cell[side] - sum(own.values())
        own["total"] = cell[side]
        sides[side] = own
    return sides


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def first_cell_table(threads: int, runs: int, emit: Callable[[str], None],
                     workloads: list[str] | None = None) -> None:
    """The table: per workload of ``workloads`` (default all) and store, medians of ``runs``
    fresh processes."""
    unknown = set(workloads or ()) - set(FIRST_CELLS)
    if unknown:
        raise SystemExit(f"unknown workloads {sorted(unknown)}: choose from {list(FIRST_CELLS)}")
    load: list[float] = []
    emit(f"First profiled cell in a new kernel, seconds outside the loop: median of {runs} "
         "fresh processes (totals with their range); `before` = cell start → loop start, "
         "`after` = loop end → cell done (run stored, line printed). The second cell of the "
         "same process, everything imported, for comparison.")
    emit("")
    emit("| workload | store | before | store check | hooks | other | after | timings | FLOPs "
         "| hardware | store write | other | both | second cell before / after |")
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, (label, setup, cell) in FIRST_CELLS.items():
        if workloads and key not in workloads:
            continue
        needs = {"lightning": "lightning", "bert": "transformers"}.get(key)
        if needs and importlib.util.find_spec(needs) is None:
            continue
        existing = os.path.join(tempfile.mkdtemp(prefix="gpuperf-first-cell-"), "runs.sqlite")
        run_children(setup, cell, threads, existing, 1)  # makes the store the others find
        for kind, store in (("new", None), ("existing", existing)):
            try:
                results = run_children(setup, cell, threads, store, runs)
            except RuntimeError as exc:
                emit(f"| {label} | {kind} | failed: {exc} |")
                continue
            load += [r["load_ext"] for r in results]
            parts = [split(r["first"]) for r in results]
            before = [p["before"] for p in parts]
            after = [p["after"] for p in parts]
            cells = [_spread([b["total"] for b in before])]
            cells += [_median([b[n] for b in before]) for n in (*BEFORE, "other")]
            cells.append(_spread([a["total"] for a in after]))
            cells += [_median([a[n] for a in after]) for n in (*AFTER, "other")]
            cells.append(_spread([b["total"] + a["total"] for b, a in zip(before, after)]))
            second = [r["second"] for r in results]
            cells.append(f"{_median([s['before'] for s in second])} / "
                         f"{_median([s['after'] for s in second])}")
            emit(f"| {label} | {kind} | " + " | ".join(cells) + " |")
    emit("")
    if load:
        emit(f"`%load_ext gpuperf_magics` (its own cell, not counted above): median "
             f"{_median(load)} s ({min(load):.3f}–{max(load):.3f}).")
