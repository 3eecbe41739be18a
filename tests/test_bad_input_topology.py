"""Bad input to ``collc topology import|show|find`` (issues 27 and 33), with the harness of
``tests/test_bad_input.py``: exit 2, exactly one line on stderr naming the problem, within
10 s, nothing written.  Then what must pass: the warnings ``topology import`` prints (on
real corpus files and small synthetic ones), a 1000-GPU ``nvidia-smi`` matrix in seconds,
and ``topology show`` accepting every ``recipe:``/``find:`` spec ``build`` accepts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from collc.cli import main
from tests.runtime_tests._shared import shared
from tests.test_bad_input import run_refused

Capture = pytest.CaptureFixture[str]
TOPO = shared("corpora", "nccl-topo")
LIMIT_S = 10.0


# --------------------------------------------------------------------------- synthetic inputs
def _gpu(i: int, extra: str = "", gpu_attrs: str = "", pci_attrs: str = 'link_speed="16.0 GT/s PCIe" '
         'link_width="16"') -> str:
    busid = f"{i >> 8:04x}:{i & 255:02x}:00.0"
    return (f'<pci busid="{busid}" class="0x030200" {pci_attrs}>'
            f'<gpu dev="{i}" sm="90" rank="{i}" {gpu_attrs}>{extra}</gpu></pci>')


def _system(body: str, cpus: int = 1, host: str = "0xabc") -> str:
    """One <system>: ``body`` under the first CPU, further CPUs empty."""
    out = ['<system version="1">']
    for c in range(cpus):
        out.append(f'<cpu numaid="{c}" host_hash="{host}" vendor="GenuineIntel" modelid="143">')
        if c == 0:
            out.append(body)
        out.append("</cpu>")
    out.append("</system>")
    return "\n".join(out) + "\n"


def _many_gpus(n: int) -> str:
    return _system("\n".join(_gpu(i) for i in range(n)))


def _cpus_with_a_gpu_each(n: int) -> str:
    out = ['<system version="1">']
    for c in range(n):
        out.append(f'<cpu numaid="{c}" host_hash="0xabc" vendor="AuthenticAMD">{_gpu(c)}</cpu>')
    return "\n".join(out + ["</system>"]) + "\n"


def _smi(n: int, cell: str = "PIX", rows: dict[int, list[str]] | None = None) -> str:
    """An ``nvidia-smi topo -m`` matrix, tab-separated like the DGX-1 file; ``rows`` replaces rows' cells."""
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity"]
    for i in range(n):
        cells = (rows or {}).get(i) or ["X" if i == j else cell for j in range(n)] + ["0-7"]
        lines.append(f"GPU{i}\t" + "\t".join(cells))
    return "\n".join(lines) + "\n"


NV4 = '<nvlink target="{t}" count="{c}" tclass="0x030200"/>'


def _pair(a_extra: str = "", gpu_attrs: tuple[str, str] = ("", ""), pci_attrs: str | None = None) -> str:
    """Two GPUs on one CPU; ``a_extra`` goes inside GPU 0."""
    kw = {} if pci_attrs is None else {"pci_attrs": pci_attrs}
    return _system(_gpu(0, a_extra, gpu_attrs[0], **kw) + _gpu(1, "", gpu_attrs[1], **kw))


def _link_file(**fields: object) -> str:
    link: dict[str, object] = {"src": 0, "dst": 1, "bidirectional": True}
    link.update(fields)
    return json.dumps({"nranks": 2, "links": [link]})


def _write(d: Path) -> None:
    """Every file a case names."""
    files: dict[str, str] = {
        # ---- nvidia-smi text that ended in a traceback
        "ragged.txt": _smi(4, rows={2: ["PIX", "X"]}),
        "digits.txt": _smi(4, rows={1: ["NV" + "1" * 5000, "X", "PIX", "PIX", "0-7"]}),
        "nv0.txt": _smi(4, "NV0"),
        "nv65.txt": _smi(4, "NV65"),
        "shifted.txt": _smi(4, rows={3: ["PIX", "PIX", "X", "PIX", "0-7"]}),
        "smi2049.txt": _smi(2049),
        "smi-sockets.txt": _smi(700, "SYS"),
        "rocm-ragged.txt": "Link Type between two GPUs\n       GPU0  GPU1  GPU2\nGPU0   0     XGMI  XGMI\n"
                           "GPU1   XGMI  0\nGPU2   XGMI  XGMI  0\n",
        # ---- NCCL XML that hung: counted before anything is built
        "g100k.xml": _many_gpus(100_000),
        "g70000.xml": _many_gpus(70_000),
        "c3000.xml": _cpus_with_a_gpu_each(3000),
        "c3000-8gpus.xml": _system("\n".join(_gpu(i) for i in range(8)), cpus=3000),
        "c65.xml": _system(_gpu(0) + _gpu(1), cpus=65),
        "pci600k.xml": _system(_gpu(0) + _gpu(1) + "<pci/>" * 600_000),
        "nics.xml": _system(_gpu(0) + _gpu(1) + "".join(
            f'<pci busid="ff{i >> 8:02x}:{i & 255:02x}:00.0" class="0x020000"><nic><net name="n{i}" speed="100000"/>'
            f'</nic></pci>' for i in range(700))),
        # ---- NCCL XML numbers and references
        "nvl-missing.xml": _pair(NV4.format(t="0000:77:00.0", c=4)),
        "nvl-missing-no-tclass.xml": _pair('<nvlink target="0000:77:00.0" count="4"/>'),
        "nvl-count-neg.xml": _pair(NV4.format(t="0000:01:00.0", c=-1)),
        "nvl-count-zero.xml": _pair(NV4.format(t="0000:01:00.0", c=0)),
        "nvl-count-huge.xml": _pair(NV4.format(t="0000:01:00.0", c=10 ** 30)),
        "nvl-count-digits.xml": _pair(NV4.format(t="0000:01:00.0", c="9" * 5000)),
        "xgmi-count.xml": _pair('<xgmi target="0000:01:00.0" count="1000" tclass="0x038000"/>'),
        "rank-neg.xml": _pair().replace('rank="0"', 'rank="-1"'),
        "rank-dup.xml": _pair().replace('rank="1"', 'rank="0"'),
        "dev-huge.xml": _pair().replace('dev="1"', 'dev="99999999999"'),
        "sm-neg.xml": _pair().replace('sm="90"', 'sm="-90"', 1),
        "width-neg.xml": _pair(pci_attrs='link_speed="16.0 GT/s PCIe" link_width="-16"'),
        "width-64.xml": _pair(pci_attrs='link_speed="16.0 GT/s PCIe" link_width="64"'),
        "speed-inf.xml": _pair(pci_attrs='link_speed="1e400 GT/s PCIe" link_width="16"'),
        "speed-neg.xml": _pair(pci_attrs='link_speed="-16 GT/s PCIe" link_width="16"'),
        "speed-huge.xml": _pair(pci_attrs='link_speed="99999 GT/s PCIe" link_width="16"'),
        "nic-neg.xml": _system(_gpu(0) + _gpu(1) + '<pci busid="ff00:00:00.0" class="0x020000"><nic>'
                               '<net name="mlx5_0" speed="-400000"/></nic></pci>'),
        "nic-inf.xml": _system(_gpu(0) + _gpu(1) + '<pci busid="ff00:00:00.0" class="0x020000"><nic>'
                               '<net name="mlx5_0" speed="1e400"/></nic></pci>'),
        "modelid-neg.xml": _pair().replace('modelid="143"', 'modelid="-1"'),
        # ---- topology files (collc topology show FILE): every numeric field
        "bw-neg.json": _link_file(bandwidth=-5),
        "bw-nan.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "bandwidth": NaN}]}',
        "bw-1e400.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "bandwidth": 1e400}]}',
        "bw-400-digits.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "bandwidth": 1' + "0" * 400 + "}]}",
        "bw-neg.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, bandwidth: -5}\n",
        "bw-nan.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, bandwidth: .nan}\n",
        "bw-1e400.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, bandwidth: 1.0e+400}\n",
        "bw-1e400-plain.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, bandwidth: 1e400}\n",
        "lat-neg.json": _link_file(latency=-1),
        "lat-nan.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, latency: .nan}\n",
        "lat-1e400.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "latency": 1e400}]}',
        "lat-400-digits.yaml": "nranks: 2\nlinks:\n  - {src: 0, dst: 1, latency: 1" + "0" * 400 + "}\n",
        "mult-zero.json": _link_file(multiplicity=0),
        "mult-neg.json": _link_file(multiplicity=-3),
        "mult-float.json": _link_file(multiplicity=2.5),
        "mult-1e400.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "multiplicity": 1e400}]}',
        "def-bw-neg.json": json.dumps({"nranks": 1, "defaults": {"bandwidth": -1}}),
        "def-bw-1e400.json": '{"nranks": 1, "defaults": {"bandwidth": 1e400}}',
        "def-lat-neg.yaml": "nranks: 1\ndefaults: {latency: -0.5}\n",
        "def-lat-digits.json": '{"nranks": 1, "defaults": {"latency": -1' + "0" * 400 + "}}",
        "def-mult-zero.json": json.dumps({"nranks": 1, "defaults": {"multiplicity": 0}}),
        "src-neg.json": _link_file(src=-1),
        "dst-digits.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1' + "0" * 400 + "}]}",
        "cycle-dup.json": json.dumps({"nranks": 2, "links": [{"src": 0, "dst": 1, "bidirectional": True}],
                                      "cycle": [0, 0]}),
        "cycle-neg.json": json.dumps({"nranks": 2, "links": [{"src": 0, "dst": 1, "bidirectional": True}],
                                      "cycle": [0, -1]}),
        "nranks-neg.json": json.dumps({"nranks": -2}),
        "nranks-float.yaml": "nranks: 2.0\n",
        "nswitches-neg.json": json.dumps({"nranks": 2, "nswitches": -1}),
        "params-nan.json": '{"nranks": 1, "params": {"bw": NaN}}',
        "params-digits.json": '{"nranks": 1, "params": {"bw": 1' + "0" * 400 + "}}",
        "dup-key.json": '{"nranks": 2, "nranks": 3}',
        "dup-link-key.json": '{"nranks": 2, "links": [{"src": 0, "dst": 1, "src": 1}]}',
        "dup-key.yaml": "nranks: 2\nlinks: [{src: 0, dst: 1, bidirectional: true}]\nlinks: []\n",
        "disconnected.json": json.dumps({"nranks": 2}),
    }
    for name, text in files.items():
        (d / name).write_text(text)


IMPORT = ["topology", "import"]
SHOW = ["topology", "show"]
FIND = ["topology", "find", "--no-cache"]

# (id, argv, word the one stderr line must contain); imports name -o, which must not appear
CASES: list[tuple[str, list[str], str]] = [
    # ---- tracebacks
    ("smi-ragged-row", [*IMPORT, "{d}/ragged.txt", "-o", "{d}/o.yaml"], "ragged"),
    ("smi-5000-digit-cell", [*IMPORT, "{d}/digits.txt", "-o", "{d}/o.yaml"], "NVLink count"),
    ("smi-nv0", [*IMPORT, "{d}/nv0.txt", "-o", "{d}/o.yaml"], "'NV0'"),
    ("smi-nv65", [*IMPORT, "{d}/nv65.txt", "-o", "{d}/o.yaml"], "1..64"),
    ("smi-shifted-row", [*IMPORT, "{d}/shifted.txt", "-o", "{d}/o.yaml"], "diagonal"),
    ("rocm-ragged-row", [*IMPORT, "{d}/rocm-ragged.txt", "-o", "{d}/o.yaml"], "ragged"),
    # ---- hangs: counted before anything is built
    ("xml-100k-gpus", [*IMPORT, "{d}/g100k.xml", "-o", "{d}/o.yaml"], "100000 GPUs, more than the 65536"),
    ("xml-70000-gpus", [*IMPORT, "{d}/g70000.xml", "-o", "{d}/o.yaml"], "70000 GPUs, more than the 65536"),
    ("xml-3000-cpus-3000-gpus", [*IMPORT, "{d}/c3000.xml", "-o", "{d}/o.yaml"], "NCCL_TOPO_MAX_NODES"),
    ("xml-3000-cpus", [*IMPORT, "{d}/c3000-8gpus.xml", "-o", "{d}/o.yaml"],
     "3000 CPUs in one <system>, more than 64"),
    ("xml-65-cpus", [*IMPORT, "{d}/c65.xml", "-o", "{d}/o.yaml"], "65 CPUs in one <system>, more than 64"),
    ("xml-600k-pci-entries", [*IMPORT, "{d}/pci600k.xml", "-o", "{d}/o.yaml"], "more than 1048576 (2^20"),
    ("xml-700-nics", [*IMPORT, "{d}/nics.xml", "-o", "{d}/o.yaml"], "700 NICs"),
    ("xml-nccl-spec-100k", [*SHOW, "nccl:{d}/g100k.xml"], "65536"),
    ("smi-2049-gpus", [*IMPORT, "{d}/smi2049.txt", "-o", "{d}/o.yaml"], "more than 2048"),
    ("smi-700-sockets", [*IMPORT, "{d}/smi-sockets.txt", "-o", "{d}/o.yaml"], "700 CPU sockets (groups of GPUs apart by SYS), more than 64"),
    ("find-degree-1e6", [*FIND, "--nodes", "1024", "--degree", "1000000"], "--degree 1000000 is more than"),
    ("find-degree-1023", [*FIND, "--nodes", "1024", "--degree", "1023"], "degrees up to 8"),
    ("find-degree-5-of-4", [*FIND, "--nodes", "4", "--degree", "5"], "--nodes - 1 = 3"),
    ("find-degree-digits", [*FIND, "--nodes", "12", "--degree", "9" * 400], "(400 digits)"),
    ("find-spec-degree", [*SHOW, "find:1024:1000000"], "--degree 1000000"),
    ("find-alpha-nan", [*FIND, "--nodes", "12", "--degree", "4", "--alpha", "nan"], "--alpha"),
    ("find-bw-inf", [*FIND, "--nodes", "12", "--degree", "4", "--bw", "inf"], "--bw"),
    # ---- NCCL XML: references and every number the importer uses
    ("xml-nvlink-missing-target", [*IMPORT, "{d}/nvl-missing.xml", "-o", "{d}/o.yaml"],
     'target="0000:77:00.0" but the host has no GPU'),
    ("xml-nvlink-missing-no-tclass", [*IMPORT, "{d}/nvl-missing-no-tclass.xml", "-o", "{d}/o.yaml"], "tclass"),
    ("xml-nvlink-count-negative", [*IMPORT, "{d}/nvl-count-neg.xml", "-o", "{d}/o.yaml"], 'count="-1"'),
    ("xml-nvlink-count-zero", [*IMPORT, "{d}/nvl-count-zero.xml", "-o", "{d}/o.yaml"], 'count="0"'),
    ("xml-nvlink-count-1e30", [*IMPORT, "{d}/nvl-count-huge.xml", "-o", "{d}/o.yaml"], "count="),
    ("xml-nvlink-count-digits", [*IMPORT, "{d}/nvl-count-digits.xml", "-o", "{d}/o.yaml"], "5000 characters"),
    ("xml-xgmi-count", [*IMPORT, "{d}/xgmi-count.xml", "-o", "{d}/o.yaml"], '<xgmi> count="1000"'),
    ("xml-rank-negative", [*IMPORT, "{d}/rank-neg.xml", "-o", "{d}/o.yaml"], 'rank="-1"'),
    ("xml-rank-duplicate", [*IMPORT, "{d}/rank-dup.xml", "-o", "{d}/o.yaml"], 'both have rank="0"'),
    ("xml-dev-huge", [*IMPORT, "{d}/dev-huge.xml", "-o", "{d}/o.yaml"], 'dev="99999999999"'),
    ("xml-sm-negative", [*IMPORT, "{d}/sm-neg.xml", "-o", "{d}/o.yaml"], 'sm="-90"'),
    ("xml-width-negative", [*IMPORT, "{d}/width-neg.xml", "-o", "{d}/o.yaml"], 'link_width="-16"'),
    ("xml-width-64", [*IMPORT, "{d}/width-64.xml", "-o", "{d}/o.yaml"], 'link_width="64"'),
    ("xml-speed-1e400", [*IMPORT, "{d}/speed-inf.xml", "-o", "{d}/o.yaml"], "link_speed="),
    ("xml-speed-negative", [*IMPORT, "{d}/speed-neg.xml", "-o", "{d}/o.yaml"], 'link_speed="-16 GT/s'),
    ("xml-speed-99999", [*IMPORT, "{d}/speed-huge.xml", "-o", "{d}/o.yaml"], "128 GT/s"),
    ("xml-nic-speed-negative", [*IMPORT, "{d}/nic-neg.xml", "-o", "{d}/o.yaml"], 'speed="-400000"'),
    ("xml-nic-speed-1e400", [*IMPORT, "{d}/nic-inf.xml", "-o", "{d}/o.yaml"], 'speed="1e400"'),
    ("xml-modelid-negative", [*IMPORT, "{d}/modelid-neg.xml", "-o", "{d}/o.yaml"], 'modelid="-1"'),
    # ---- topology files: every numeric field of the format
    ("file-bw-negative-json", [*SHOW, "{d}/bw-neg.json"], "-5"),
    ("file-bw-nan-json", [*SHOW, "{d}/bw-nan.json"], "bandwidth must be a finite number, got nan"),
    ("file-bw-1e400-json", [*SHOW, "{d}/bw-1e400.json"], "bandwidth must be a finite number, got inf"),
    ("file-bw-400-digits", [*SHOW, "{d}/bw-400-digits.json"], "bandwidth must be a finite number"),
    ("file-bw-negative-yaml", [*SHOW, "{d}/bw-neg.yaml"], "got -5"),
    ("file-bw-nan-yaml", [*SHOW, "{d}/bw-nan.yaml"], "got nan"),
    ("file-bw-1e400-yaml", [*SHOW, "{d}/bw-1e400.yaml"], "got inf"),
    ("file-bw-1e400-yaml-string", [*SHOW, "{d}/bw-1e400-plain.yaml"], "'1e400'"),
    ("file-lat-negative", [*SHOW, "{d}/lat-neg.json"], "latency"),
    ("file-lat-nan", [*SHOW, "{d}/lat-nan.yaml"], "latency must be a finite number, got nan"),
    ("file-lat-1e400", [*SHOW, "{d}/lat-1e400.json"], "latency must be a finite number, got inf"),
    ("file-lat-400-digits", [*SHOW, "{d}/lat-400-digits.yaml"], "latency must be a finite number"),
    ("file-mult-zero", [*SHOW, "{d}/mult-zero.json"], "multiplicity must be >= 1, got 0"),
    ("file-mult-negative", [*SHOW, "{d}/mult-neg.json"], "multiplicity must be >= 1, got -3"),
    ("file-mult-float", [*SHOW, "{d}/mult-float.json"], "multiplicity must be an integer, got 2.5"),
    ("file-mult-1e400", [*SHOW, "{d}/mult-1e400.json"], "multiplicity must be an integer, got inf"),
    ("file-defaults-bw-negative", [*SHOW, "{d}/def-bw-neg.json"], "defaults.bandwidth"),
    ("file-defaults-bw-1e400", [*SHOW, "{d}/def-bw-1e400.json"], "defaults.bandwidth"),
    ("file-defaults-lat-negative", [*SHOW, "{d}/def-lat-neg.yaml"], "defaults.latency"),
    ("file-defaults-lat-digits", [*SHOW, "{d}/def-lat-digits.json"], "defaults.latency"),
    ("file-defaults-mult-zero", [*SHOW, "{d}/def-mult-zero.json"], "defaults.multiplicity"),
    ("file-rank-negative", [*SHOW, "{d}/src-neg.json"], "links[0].src must be >= 0, got -1"),
    ("file-rank-400-digits", [*SHOW, "{d}/dst-digits.json"], "links[0].dst must be <="),
    ("file-cycle-duplicate-rank", [*SHOW, "{d}/cycle-dup.json"], "exactly once"),
    ("file-cycle-negative-rank", [*SHOW, "{d}/cycle-neg.json"], "cycle entry must be >= 0, got -1"),
    ("file-nranks-negative", [*SHOW, "{d}/nranks-neg.json"], "nranks must be >= 1"),
    ("file-nranks-float", [*SHOW, "{d}/nranks-float.yaml"], "nranks must be an integer, got 2.0"),
    ("file-nswitches-negative", [*SHOW, "{d}/nswitches-neg.json"], "nswitches must be >= 0"),
    ("file-params-nan", [*SHOW, "{d}/params-nan.json"], "params: bad entry 'bw': nan"),
    ("file-params-400-digits", [*SHOW, "{d}/params-digits.json"], "params: bad entry 'bw'"),
    ("file-duplicate-key-json", [*SHOW, "{d}/dup-key.json"], "key nranks is given twice"),
    ("file-duplicate-link-key", [*SHOW, "{d}/dup-link-key.json"], "key src is given twice"),
    ("file-duplicate-key-yaml", [*SHOW, "{d}/dup-key.yaml"], "key links is given twice"),
    ("file-disconnected-prints-nothing", [*SHOW, "{d}/disconnected.json"], "not all reachable"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-topology")
    _write(d)
    return d


def test_case_ids_are_unique() -> None:
    assert len({c[0] for c in CASES}) == len(CASES) >= 70


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_topology_input_exits_2_with_one_line(scratch: Path, capsys: Capture, argv: list[str],
                                                  needle: str) -> None:
    args = [a.replace("{d}", str(scratch)) for a in argv]
    line = run_refused(scratch, capsys, args, needle, LIMIT_S, quiet=True)   # nothing printed before the refusal
    assert "warning" not in line


# --------------------------------------------------------------------------- what must pass
def _import(capsys: Capture, *args: str) -> tuple[str, list[str]]:
    """``collc topology import``: exit 0; stdout and the stderr lines (all of them warnings)."""
    start = time.monotonic()
    code = main(["topology", "import", *args])
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 0, err
    warnings = err.splitlines()
    assert all(w.startswith("collc: warning: ") for w in warnings), err
    assert took < LIMIT_S, f"import took {took:.1f} s"
    return out, warnings


def test_a_1000_gpu_nvidia_smi_matrix_imports_in_seconds(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "smi1000.txt"
    path.write_text(_smi(1000, rows={i: ["NV1" if j == i ^ 1 else ("X" if j == i else "PIX") for j in range(1000)]
                                     + ["0-7"] for i in range(1000)}))
    out, warnings = _import(capsys, str(path), "-o", str(tmp_path / "t.json"))
    assert "1000 GPUs" in out and "(1000 GPU-to-GPU)" in out and warnings == []
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["nranks"] == 1000 and data["nswitches"] == 2     # one PIX switch on one CPU


def _corpus(rel: str) -> Path:
    p = TOPO / rel
    if not p.is_file():
        pytest.skip(f"{rel} not in the corpus at {TOPO}")
    return p


def test_warning_8xh100_dump_without_nvlink(capsys: Capture) -> None:
    # AWS p5.48xlarge input: 8 H100 (sm 90) and no <nvlink> entry, imported as a PCIe-only box
    _, warnings = _import(capsys, str(_corpus("aws_p5.48xl-topo_pr1226.xml")))
    assert len(warnings) == 1
    assert "has 8 GPUs (sm 90) but no <nvlink> or <xgmi> entry: modelled PCIe-only" in warnings[0]


def test_warning_implausible_bandwidth_in_a_real_dump(capsys: Capture) -> None:
    # IBM Cloud's 8xH100 VSI: virtual bridges reported at 2.5 GT/s x1, NCCL's 0.1875 GB/s
    out, warnings = _import(capsys, str(_corpus("ibm-cloud_8x-h100_topo.xml")))
    assert "0.1875" in out
    assert len(warnings) == 1
    assert "8 link(s) of 0.1875 GB/s (e.g. cpu0 - pci:0000:a1:00.0), outside the plausible 1..2000" in warnings[0]


@pytest.mark.parametrize("rel", ["yccl_8x-h800_topo.xml", "rccl/rccl_topo_8p_940.xml",
                                 "nvidia-smi/h100-sxm_nv18_numa_topo-m.txt",
                                 "nvidia-smi/dgx1_v100_mlx5-rows_topo-m.txt",
                                 "nvidia-smi/mi308x_rocm-smi_showtopo.txt"])
def test_no_warning_on_nvlink_and_xgmi_machines(capsys: Capture, rel: str) -> None:
    _, warnings = _import(capsys, str(_corpus(rel)))
    assert warnings == []


def test_warnings_on_small_synthetic_files(tmp_path: Path, capsys: Capture) -> None:
    pcie = tmp_path / "pcie.xml"
    pcie.write_text(_pair())
    out_file = tmp_path / "pcie.yaml"
    _, warnings = _import(capsys, str(pcie), "-o", str(out_file))
    assert out_file.is_file()                                   # a warning does not stop the import
    assert len(warnings) == 1 and "host 0xabc has 2 GPUs (sm 90) but no <nvlink>" in warnings[0]

    nvl = tmp_path / "nvl.xml"
    nvl.write_text(_pair(NV4.format(t="0000:01:00.0", c=4)))
    assert _import(capsys, str(nvl))[1] == []

    slow = tmp_path / "slow.xml"                                # PCIe 2.5 GT/s x1 under an NVLink pair
    slow.write_text(_pair(NV4.format(t="0000:01:00.0", c=4), pci_attrs='link_speed="2.5 GT/s PCIe" '
                          'link_width="1"'))
    _, warnings = _import(capsys, str(slow))
    assert len(warnings) == 1 and "2 link(s) of 0.1875 GB/s" in warnings[0]

    gbe = tmp_path / "gbe.xml"                                  # two hosts joined by a 1 GbE NIC
    nic = '<pci busid="ff00:00:00.0" class="0x020000"><nic><net name="eno1" speed="1000"/></nic></pci>'
    gbe.write_text(_system(_gpu(0) + nic, host="0x1"))
    other = tmp_path / "other.xml"
    other.write_text(_system(_gpu(0) + nic.replace('"1000"', '"400000"'), host="0x2"))
    _, warnings = _import(capsys, str(gbe), str(other))
    assert len(warnings) == 1 and "1 link(s) of 0.125 GB/s (e.g. nic:ff00:00:00.0 - network)" in warnings[0]

    smi = tmp_path / "smi.txt"
    smi.write_text(_smi(4))
    _, warnings = _import(capsys, str(smi))
    assert len(warnings) == 1 and "4 GPUs but no NV# cell: modelled PCIe-only" in warnings[0]

    odd = tmp_path / "odd.txt"
    odd.write_text(_smi(3, "NV2", rows={0: ["X", "NV2", "QPI", "0-7"], 2: ["FOO", "NV2", "X", "0-7"]}))
    _, warnings = _import(capsys, str(odd))
    assert len(warnings) == 2 and "'QPI' (GPU0-GPU2) is not an nvidia-smi relation" in warnings[0]


# --------------------------------------------------------------------------- B: show accepts what build accepts
SPECS = ["recipe:K4,4", "recipe:C12(2,3)", "find:12:4:1,bi", "find:12:4", "recipe:UR4□UR4", "UR4&UR4",
         "recipe:K3*2", "recipe:BR4^2", "T(4x4)", "recipe:Bi(UR6)", "recipe:L(K5)", "GK(3,12)", "recipe:DC8(1,3)",
         "DRG(octahedron)",
         # refused by both, with the same line
         "recipe:Q(5)", "find:12", "find:12:4:9,bi", "recipe:L3(C16(3,4)", "recipe:L(B(2,2))", "find:12:99"]


@pytest.mark.parametrize("spec", SPECS)
def test_topology_show_accepts_what_build_accepts(tmp_path: Path, capsys: Capture, spec: str) -> None:
    out_xml = tmp_path / "b.xml"
    built = main(["build", "--topology", spec, "--algorithm", "bfb", "--collective", "allgather",
                  "-o", str(out_xml)])
    build_err = capsys.readouterr().err
    shown = main(["topology", "show", spec, "--json"])
    show_out, show_err = capsys.readouterr()
    assert (built, shown) in ((0, 0), (2, 2)), (build_err, show_err)
    if shown == 0:
        assert json.loads(show_out)["nranks"] >= 4 and out_xml.is_file()
    else:
        assert show_err == build_err and show_err.count("\n") == 1
