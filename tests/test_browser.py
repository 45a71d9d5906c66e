"""The what-if panel in a real browser: JupyterLab started here, Debian's Chromium driven by
Playwright.

One notebook profiles a small CNN on the CPU with ``%%profile_training`` and shows
``%predict_time -w``; the test runs it through JupyterLab's menus, changes the panel's controls
and watches the answer, the plot and the offers table follow. It saves the notebook, shuts the
kernel down and opens the notebook again, first with a fresh kernel (which holds none of the
widgets), then in another JupyterLab that starts no kernel and does not trust the notebook: both
times the saved answer (the prediction, the plot and the offers table) must show. The widgets
cannot render there; the saved answer is a plain HTML output of its own next to the widget's,
which a style carried by the live widgets hides while they render.

Needs ``playwright`` and ``jupyterlab`` (the ``test`` extra) and Chromium at
``/usr/bin/chromium`` (``apt-get install chromium``; ``$GPUPERF_CHROMIUM`` names another);
Playwright's own browser download is not used. Without them the test is skipped with the reason;
under CI (``CI=true``) it fails instead. ``GPUPERF_SCREENSHOTS=DIR`` keeps the screenshots.
Select it alone with ``pytest -m browser``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ci import in_ci

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CHROMIUM = os.environ.get("GPUPERF_CHROMIUM", "/usr/bin/chromium")
# No network, no GPU, no sandbox (CI runs as root): a browser that only talks to localhost.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
KERNEL = "gpuperf-browser-test"
NOTEBOOK = "panel.ipynb"
#: Profiling three batch sizes and fitting take seconds; a loaded 2-core box gets room.
SLOW_MS = 180_000
#: Tall enough for the whole panel: an element screenshot is cut at the notebook's own scroll.
VIEWPORT = {"width": 1600, "height": 2400}

CELLS = [
    """\
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
%load_ext gpuperf_magics
%config GpuPerf.store = "runs.sqlite\"""",
    """\
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(16, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
data = torch.utils.data.TensorDataset(torch.randn(512, 3, 16, 16), torch.randint(0, 10, (512,)))


def train(batch_size, steps=12):
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    for step, (x, y) in enumerate(loader):
        if step == steps:
            break
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()""",
    "%%profile_training -n cnn\ntrain(16)",
    "%%profile_training -n cnn\ntrain(32)",
    "%%profile_training -n cnn\ntrain(64)",
    "%predict_time cnn -w --batch-size 32 --epochs 2 --samples 512",
]


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the browser test must run)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "gpuperf (test)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)


# --------------------------------------------------------------------------- JupyterLab
class JupyterLab:
    """A JupyterLab server on a free localhost port over ``root``, with its own Jupyter
    folders (config, data, runtime, settings) so nothing of the user's is read or written,
    and one kernel: this test's Python (the project's .venv)."""

    def __init__(self, root: Path, home: Path, *extra: str) -> None:
        self.root, self.home, self.extra = root, home, extra
        self.token = uuid.uuid4().hex
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = home / f"lab-{uuid.uuid4().hex[:6]}.log"
        kernel = home / "path" / "kernels" / KERNEL
        kernel.mkdir(parents=True, exist_ok=True)
        (kernel / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "gpuperf (test)", "language": "python",
        }))
        settings = home / "settings" / "@jupyterlab"
        # No news or update checks (no network), and every cell kept in the page (a windowed
        # notebook leaves cells out of the DOM until scrolled to).
        for plugin, values in (("apputils-extension/notification",
                                {"fetchNews": "false", "checkForUpdates": False}),
                               ("notebook-extension/tracker", {"windowingMode": "none"})):
            file = settings / f"{plugin}.jupyterlab-settings"
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(values))

    @property
    def runtime(self) -> Path:
        return self.home / "runtime"

    def url(self, path: str = "", **query: str) -> str:
        return (f"http://127.0.0.1:{self.port}/{path}?"
                + "&".join(f"{k}={v}" for k, v in {"token": self.token, **query}.items()))

    def api(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def start(self) -> None:
        env = {**os.environ,
               "JUPYTER_PATH": str(self.home / "path"),
               "JUPYTER_CONFIG_DIR": str(self.home / "config"),
               "JUPYTER_DATA_DIR": str(self.home / "data"),
               "JUPYTER_RUNTIME_DIR": str(self.runtime),
               "IPYTHONDIR": str(self.home / "ipython"),
               "JUPYTER_PLATFORM_DIRS": "1", "OMP_NUM_THREADS": "1",
               # The kernel imports the package under test (this checkout), not whichever
               # copy the environment installed.
               "PYTHONPATH": os.pathsep.join(
                   p for p in (str(Path(__file__).resolve().parents[1]),
                               os.environ.get("PYTHONPATH")) if p)}
        for attempt in range(3):  # another process may take the free port meanwhile
            self.port = _free_port()
            argv = [sys.executable, "-m", "jupyterlab", "--no-browser",
                    "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                    "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                    f"--ServerApp.root_dir={self.root}",
                    f"--MultiKernelManager.default_kernel_name={KERNEL}",
                    f"--LabApp.user_settings_dir={self.home / 'settings'}",
                    f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
                    *self.extra]
            if os.geteuid() == 0:  # CI containers run as root
                argv.append("--allow-root")
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(argv, cwd=self.root, env=env, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and self.process.poll() is None:
                with contextlib.suppress(OSError, urllib.error.URLError):
                    self.api("status")
                    return
                time.sleep(0.2)
            self.stop()
            if attempt == 2 or "already in use" not in self.log_tail():
                break
        raise RuntimeError(f"JupyterLab did not start:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""

    def kernels(self) -> list[dict[str, Any]]:
        return list(self.api("kernels"))

    def stop(self) -> None:
        """Shut the kernels and the server down; kill whatever of them is left."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(Exception):
                for kernel in self.kernels():
                    self.api(f"kernels/{kernel['id']}", method="DELETE")
            process.terminate()  # the server shuts its kernels down on SIGTERM
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        # Kernels run in their own session: find ours by their connection files' folder.
        for pid in _pids_mentioning(str(self.runtime)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace"):
                found.append(int(entry.name))
    return found


@pytest.fixture
def lab_factory(tmp_path: Path) -> Iterator[Any]:
    """``lab_factory(*options)``: a started JupyterLab over one notebook folder; every server
    and kernel it started is stopped at the end, whatever the test did."""
    pytest.importorskip("nbformat")
    try:
        import jupyterlab  # noqa: F401
    except ImportError as exc:
        _unavailable(f"jupyterlab is not installed ({exc}): pip install -e '.[test]'")
    root = tmp_path / "notebooks"
    root.mkdir()
    _write_notebook(root / NOTEBOOK)
    started: list[JupyterLab] = []

    def start(*options: str) -> JupyterLab:
        home = tmp_path / f"jupyter-{len(started)}"
        home.mkdir()
        lab = JupyterLab(root, home, *options)
        started.append(lab)
        lab.start()
        return lab

    try:
        yield start
    finally:
        for lab in started:
            lab.stop()
            # Shown by pytest when the test failed: what the server and its kernels said.
            print(f"--- {lab.log.name}\n{lab.log_tail(6000)}")


# --------------------------------------------------------------------------- Chromium
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium under Playwright (never Playwright's own download)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}): pip install -e '.[test]'")
    if not Path(CHROMIUM).is_file():
        _unavailable(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set "
                     "GPUPERF_CHROMIUM)")
    playwright = sync_playwright().start()
    try:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as exc:
            _unavailable(f"Chromium at {CHROMIUM} did not start under Playwright: {exc}")
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def screenshots(tmp_path: Path) -> Any:
    """``screenshots(locator_or_page, name)``: a PNG in the test's folder, and in
    ``$GPUPERF_SCREENSHOTS`` when set (``whatif_panel.png`` there is docs/whatif_panel.png)."""
    folder = tmp_path / "screenshots"
    folder.mkdir()
    keep = os.environ.get("GPUPERF_SCREENSHOTS")

    def take(target: Any, name: str, height: int | None = None) -> Path:
        """``target`` whole, or its top ``height`` pixels."""
        path = folder / f"{name}.png"
        if height is None:
            target.screenshot(path=str(path))
        else:
            target.scroll_into_view_if_needed()
            box = target.bounding_box()
            target.page.screenshot(path=str(path), clip={
                "x": box["x"], "y": box["y"], "width": box["width"],
                "height": min(box["height"], height)})
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(keep) / path.name)
        return path

    return take


# --------------------------------------------------------------------------- the page
def _menu(page: Any, menu: str, item: str | re.Pattern[str]) -> None:
    page.get_by_role("menuitem", name=menu, exact=True).click()
    page.get_by_role("menuitem", name=item).click()


def _control(scope: Any, label: str) -> Any:
    """The ipywidgets control labelled ``label`` (its row: a label and an input)."""
    return scope.locator(".widget-inline-hbox").filter(
        has=scope.page.locator("label.widget-label",
                               has_text=re.compile(f"^{re.escape(label)}$")))


def _kernel_status(page: Any) -> Any:
    """The status bar's kernel item: "<kernel> | <status>", or "No Kernel | ..."."""
    return page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\|"))


def _open_notebook(page: Any, lab: JupyterLab) -> Any:
    page.goto(lab.url(f"lab/tree/{NOTEBOOK}", reset=""))
    notebook = page.locator(".jp-NotebookPanel")
    notebook.locator(".jp-Notebook .jp-CodeCell").last.wait_for()
    return notebook


def _new_page(browser: Any, errors: list[str], phase: str) -> Any:
    """A page whose uncaught script errors are collected, named by ``phase``."""
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda exc: errors.append(f"{phase}: {exc}\n{exc.stack}"))
    return page


def _expect_saved_answer(outputs: Any, shown: str) -> None:
    """The panel's saved copy is shown: the last answer, its plot and its offers table."""
    from playwright.sync_api import expect

    saved = outputs.locator(".gpuperf-whatif-saved")
    expect(saved).to_be_visible()
    expect(saved).to_contain_text(shown.splitlines()[0])
    expect(saved.locator(".gpuperf-prediction table")).to_be_visible()
    expect(saved.locator(".gpuperf-offers table")).to_contain_text("cheapest within deadline")
    image = saved.locator("img")
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth > 200")


def _reload_and_redisplay(page: Any, notebook: Any, screenshots: Any) -> Any:
    """Reload the page, change the panel, display it again in a new cell and change it there;
    the new cell's output area."""
    from playwright.sync_api import expect

    page.reload()
    cells = notebook.locator(".jp-Notebook .jp-CodeCell")
    outputs = cells.nth(len(CELLS) - 1).locator(".jp-Cell-outputArea")
    iterations = outputs.locator(".widget-html-content .gpuperf-prediction td").nth(1)
    expect(_kernel_status(page)).to_have_text(re.compile(r"^gpuperf \(test\) \| Idle$"),
                                              timeout=SLOW_MS)
    expect(iterations).to_have_text("8", timeout=SLOW_MS)  # the live widgets, batch 128
    batch = _control(outputs, "batch size").locator("input")
    batch.fill("64")
    batch.press("Enter")
    expect(iterations).to_have_text("16")
    note = outputs.get_by_text("The page was reloaded")
    expect(note).to_be_visible()
    screenshots(outputs, "whatif_panel_reloaded")
    again = note.locator("code").inner_text()  # the code that gives the panel back
    # A new cell below the panel's that shows the panel again.
    cells.nth(len(CELLS) - 1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")  # command mode, the panel's cell active
    page.keyboard.press("b")
    expect(cells).to_have_count(len(CELLS) + 1)
    cells.last.locator(".jp-InputArea-editor").click()
    page.keyboard.type(again)
    page.keyboard.press("Control+Enter")
    outputs = cells.last.locator(".jp-Cell-outputArea")
    iterations = outputs.locator(".widget-html-content .gpuperf-prediction td").nth(1)
    expect(iterations).to_have_text("16", timeout=SLOW_MS)
    expect(outputs.locator(".gpuperf-whatif-saved")).to_be_hidden()
    expect(note).to_have_count(0)  # shown again: the saved copy follows from here
    batch = _control(outputs, "batch size").locator("input")
    batch.fill("128")
    batch.press("Enter")
    expect(iterations).to_have_text("8")
    # The saved copy is rewritten just after the widgets (hidden, but in the page).
    expect(outputs.locator(".gpuperf-whatif-saved")).to_contain_text("batch 128")
    return outputs


def test_panel_follows_its_controls_and_a_reopened_notebook_shows_the_saved_answer(
        browser, lab_factory, screenshots):
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    lab = lab_factory()
    errors: list[str] = []
    page = _new_page(browser, errors, "live")
    notebook = _open_notebook(page, lab)
    # Cells run before the kernel is up would open the kernel chooser instead (the toolbar's
    # execution indicator says idle already while there is no kernel; the status bar does not).
    expect(_kernel_status(page)).to_have_text(re.compile(r"^gpuperf \(test\) \| Idle$"),
                                              timeout=SLOW_MS)
    _menu(page, "Run", re.compile(r"^Run All Cells"))

    outputs = notebook.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-Cell-outputArea")
    # The answer is shown as %predict_time shows a prediction: its table's second column is
    # the job's iterations.
    answer = outputs.locator(".widget-html-content .gpuperf-prediction")
    iterations = answer.locator("td").nth(1)
    table = outputs.locator(".widget-html-content .gpuperf-offers")
    plot = outputs.locator(".widget-output img")
    saved = outputs.locator(".gpuperf-whatif-saved")
    expect(iterations).to_have_text("32", timeout=SLOW_MS)  # 2 × 512 ÷ 32
    expect(table.locator("table")).to_be_visible()
    expect(plot).to_be_visible()
    # The saved copy of the answer is in the page but hidden while the widgets render.
    expect(saved).to_have_count(1)
    expect(saved).to_be_hidden()
    screenshots(outputs, "whatif_panel", height=980)  # controls, plot, answer, first offers
    screenshots(outputs, "whatif_panel_whole")

    # A batch size: the answer, the plot and the table are redone for it.
    before = {"answer": answer.inner_text(), "table": table.inner_text(),
              "plot": plot.get_attribute("src")}
    batch = _control(outputs, "batch size").locator("input")
    batch.fill("128")
    batch.press("Enter")
    expect(iterations).to_have_text("8")
    expect(answer).not_to_have_text(before["answer"])
    expect(table).not_to_have_text(before["table"])
    expect(plot).not_to_have_attribute("src", before["plot"] or "")

    # A GPU: the answer becomes a transfer to it, and the plot gains its curve.
    before = {"answer": answer.inner_text(), "plot": plot.get_attribute("src")}
    _control(outputs, "GPU").locator("select").select_option(label="NVIDIA A100-SXM4-40GB")
    expect(answer).to_contain_text("transfer")
    expect(answer).not_to_have_text(before["answer"])
    expect(plot).not_to_have_attribute("src", before["plot"] or "")

    # A deadline: the table picks the cheapest offer that meets it.
    before = {"table": table.inner_text()}
    deadline = _control(outputs, "deadline (h, 0: none)").locator("input")
    deadline.fill("0.5")
    deadline.press("Enter")
    expect(table).not_to_have_text(before["table"])
    expect(table).to_contain_text("deadline 0:30:00")
    expect(table).to_contain_text("cheapest within deadline")
    screenshots(outputs, "whatif_panel_changed")

    # A page reload: the widgets render again from the kernel, but the page has forgotten which
    # output the saved copy is; the panel says so, and a display in a new cell saves again.
    _menu(page, "File", re.compile(r"^Save Notebook(?! As)"))
    expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(0)
    outputs = _reload_and_redisplay(page, notebook, screenshots)
    answer = outputs.locator(".widget-html-content .gpuperf-prediction")
    shown = answer.inner_text()

    # Save, shut the kernel down, close the page.
    _menu(page, "File", re.compile(r"^Save Notebook(?! As)"))
    expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(0)
    _menu(page, "Kernel", re.compile(r"^Shut Down Kernel"))
    expect(_kernel_status(page)).to_have_text(re.compile(r"^No Kernel"))
    page.close()
    assert not errors, errors

    # The file holds the last answer, as a plain output of its own next to the widget's.
    import nbformat

    last = nbformat.read(lab.root / NOTEBOOK, as_version=4).cells[-1]
    kinds = [sorted(o.get("data", {})) for o in last.outputs]
    assert kinds == [["application/vnd.jupyter.widget-view+json", "text/plain"],
                     ["text/html", "text/plain"]], kinds
    copy = last.outputs[1]["data"]["text/html"]
    assert "gpuperf-whatif-saved" in copy and ">8</td>" in copy
    assert "batch 128" in copy  # the copy shown again after the reload followed the change

    # Reopened the next day: a fresh kernel starts, which holds none of the widgets.
    page = _new_page(browser, errors, "reopened with a kernel")
    outputs = _open_notebook(page, lab).locator(".jp-Notebook .jp-CodeCell").last.locator(
        ".jp-Cell-outputArea")
    expect(_kernel_status(page)).to_have_text(re.compile(r"^gpuperf \(test\) \| Idle$"),
                                              timeout=SLOW_MS)
    _expect_saved_answer(outputs, shown)
    screenshots(outputs, "whatif_panel_reopened_kernel")
    page.close()
    lab.stop()

    # Reopened where no kernel starts, by a server with other Jupyter folders (so the notebook
    # is not trusted there and its HTML is sanitised): the saved answer shows all the same.
    lab = lab_factory("--LabApp.notebook_starts_kernel=False")
    page = _new_page(browser, errors, "reopened without a kernel")
    outputs = _open_notebook(page, lab).locator(".jp-Notebook .jp-CodeCell").last.locator(
        ".jp-Cell-outputArea")
    expect(_kernel_status(page)).to_have_text(re.compile(r"^No Kernel"))
    _expect_saved_answer(outputs, shown)
    assert lab.kernels() == []
    screenshots(outputs, "whatif_panel_reopened")
    page.close()
    # ipywidgets' own manager throws in a notebook without a kernel (its models cannot be
    # fetched; jupyter-widgets/ipywidgets#3970): not this package's doing.
    assert [e for e in errors if "jupyterlab-manager" not in e] == [], errors
