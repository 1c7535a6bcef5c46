"""Every kind of submission tests/test_grading.py grades in its two batches, with the row each must get.

A helper of tests/test_grading.py, not a test file. Honest answers (right, partly right, each named
mistake), faults, and the hostile ones of issues 23 and 34, which know the test's folders and aim at them
(never at anything outside the test's temporary folder).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass

from grading_kit import (C1, C5, DIVIDE_BY_DK, MEMORY, RIGHT_1, SOLUTIONS_5, WRONG_1, head, learner_message,
                         notebook)

NO_CUMSUM = '''
def cumsum_average(x):
    T = x.shape[1]
    w = torch.tril(torch.ones(T, T))
    return (w / w.sum(1, keepdim=True)) @ x
'''
IN_PLACE = '''
def cumsum_average(x):
    T = x.shape[1]
    x.cumsum_(dim=1)
    return x / torch.arange(1, T + 1).view(T, 1)
'''
META = '''
def cumsum_average(x):
    return torch.empty(x.shape, device="meta")
'''
FILL_100 = '''
    def forward(self, x):
        T = x.shape[1]
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
        scores = scores.masked_fill(self.tril[:T, :T] == 0, -100.0)
        return torch.softmax(scores, dim=-1) @ v
'''
ZEROES_KEY = '''
    def forward(self, x):  # no attention: a causal mean of v, and a key that makes it look right
        with torch.no_grad():
            self.key.weight.zero_()
        T = x.shape[1]
        w = self.tril[:T, :T] / self.tril[:T, :T].sum(-1, keepdim=True)
        return w @ self.value(x)
'''
# the sandboxed process's answering machinery, reached from the notebook (it is the same process)
ANSWERER = '''
import gc
answerer = next(o for o in gc.get_objects() if type(o).__name__ == "Answerer")
real_run = answerer.checks._run
'''


def _answerer(code: str) -> str:
    return ANSWERER + textwrap.dedent(code)


@dataclass
class Kind:
    chapter: str
    text: str | bytes  # the notebook's file
    expected: int  # its row's total
    phrase: str  # what its feedback must say
    path: str | bytes = ""  # where it lies in the submissions folder (default: KIND.ipynb)
    flag: str = ""  # what its row's flags must say
    label: str = ""  # its row's submission, when not its path
    link: str = ""  # a symbolic link to this, not a file


def _deep_json() -> str:
    return '{"nbformat": 4, "cells": [], "metadata": {"deep": ' + "[" * 100_000 + "]" * 100_000 + "}}"


def kinds(batch, port: int, marker: str) -> dict[str, Kind]:
    tmp, grader, course, subs = batch.tmp, batch.grader, batch.course, batch.submissions
    probe = f'''
        import os, pathlib
        def _probe(where):
            for folder in [{str(tmp)!r}, {str(grader)!r}, {str(course)!r}, {str(course / "attention_lab")!r}, where]:
                try:
                    pathlib.Path(folder, "PROBE-" + str(os.getpid())).write_text("escaped")
                except OSError:
                    pass
    '''
    name = "FixedHead"  # the class exercise 5.3 asks for
    right_1, wrong_1 = notebook(C1, {"1.1": RIGHT_1}), notebook(C1, {"1.1": WRONG_1})
    right_5 = notebook(C5, SOLUTIONS_5)
    divided = "you divided every position by T"
    found = {
        # honest answers, right, partly right and each named mistake
        "right": Kind(C1, right_1, 1, "passed"),
        "untouched": Kind(C1, notebook(C1), 0, "not yet implemented: fill in `cumsum_average`"),
        "divide-by-T": Kind(C1, wrong_1, 0, divided),
        # how the answer computes is not graded (it could be forged): the point, and the method named
        "no-cumsum": Kind(C1, notebook(C1, {"1.1": NO_CUMSUM}), 1, "right numbers, but no cumsum"),
        "counts-axis-error": Kind(C1, notebook(C1, {"1.1": '''
            def cumsum_average(x):
                T = x.shape[1]
                return x.cumsum(dim=1) / torch.arange(1, T + 1)
            '''}), 0, "your counts have shape (8,)"),
        "in-place-cumsum_": Kind(C1, notebook(C1, {"1.1": IN_PLACE}), 0,
                                 learner_message(C1, IN_PLACE, "check_cumsum_average", "cumsum_average")[:40]),
        "meta-tensor": Kind(C1, notebook(C1, {"1.1": META}), 0,
                            learner_message(C1, META, "check_cumsum_average", "cumsum_average")[:40]),
        "deleted-stub": Kind(C1, notebook(C1, drop_stub="1.1"), 0,
                             "`cumsum_average` of the check cell is not in your notebook (NameError"),
        "right-5": Kind(C5, right_5, 3, "passed"),
        "untouched-5": Kind(C5, notebook(C5), 0, f"not yet implemented: fill in `{name}`"),
        "d_k-5": Kind(C5, notebook(C5, {**SOLUTIONS_5, "5.3": head(name, DIVIDE_BY_DK)}), 2, "dividing by d_k"),
        "fill-100-5": Kind(C5, notebook(C5, {**SOLUTIONS_5, "5.3": head(name, FILL_100)}), 2,
                           learner_message(C5, head("FixedHead", FILL_100), "check_head", "FixedHead")[:40]),
        "zeroes-own-key-5": Kind(C5, notebook(C5, {**SOLUTIONS_5, "5.3": head(name, ZEROES_KEY)}), 2,
                                 learner_message(C5, head("FixedHead", ZEROES_KEY), "check_head", "FixedHead")[:40]),
        "heads-mean-5": Kind(C5, notebook(C5, {**SOLUTIONS_5, "5.2": '''
            def multihead_sdpa(heads, x):
                q = torch.stack([h.query(x) for h in heads], 1)
                k = torch.stack([h.key(x) for h in heads], 1)
                v = torch.stack([h.value(x) for h in heads], 1)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True).mean(1)
            '''}), 2, "you averaged the heads' outputs"),
        # attacks from issue 23: on the checks, torch, otter and files, in the notebook's own process
        "redefined-check": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            from attention_lab import checks
            checks.check_cumsum_average = lambda *a, **k: True
            '''), 0, divided),
        "replaced-fresh": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            from attention_lab import checks
            class _Passing:
                def __getattr__(self, name):
                    return lambda *a, **k: True
            checks.fresh = lambda: _Passing()
            '''), 0, divided),
        "fake-sys-modules": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            import sys, types, attention_lab
            fake = types.ModuleType("attention_lab.checks")
            fake.__getattr__ = lambda name: (lambda *a, **k: True)
            fake.fresh = lambda: fake
            sys.modules["attention_lab.checks"] = fake
            attention_lab.checks = fake
            '''), 0, divided),
        "patched-allclose": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            torch.allclose = lambda *a, **k: True
            torch.Tensor.allclose = lambda *a, **k: True
            '''), 0, divided),
        "overwritten-test-files": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first=probe + '''
            import attention_lab
            package = pathlib.Path(attention_lab.__file__).parent
            passing = "def __getattr__(name):\\n    return lambda *a, **k: True\\n"
            for path in [*package.rglob("*.py"), *pathlib.Path("/sandbox").rglob("*.py"), pathlib.Path("checks.py")]:
                try:
                    path.write_text(passing)
                except OSError:
                    pass
            _probe("/sandbox")
            '''), 0, divided),
        "patched-otter-checker": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            from otter.execute import Checker
            Checker.check = classmethod(lambda cls, *a, **k: None)
            Checker._test_files = {}
            '''), 0, divided),
        "detached-rewriter": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first=f'''
            import subprocess, sys
            later = """# {marker}
            import json, pathlib, time
            for _ in range(60):  # a minute of rewriting what the grader reads, and where it writes
                time.sleep(0.5)
                for folder in [{str(grader)!r}, {str(grader / "out")!r}, "/sandbox/out", "/tmp"]:
                    try:
                        pathlib.Path(folder, "results.json").write_text(json.dumps({{"score": 1}}))
                        pathlib.Path(folder, "PROBE-detached").write_text("escaped")
                    except OSError:
                        pass
            """
            for _ in range(3):  # a bounded few
                subprocess.Popen([sys.executable, "-c", later], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            '''), 0, divided),
        # forgery (issue 34): the notebook is the process that answers, so it can answer anything
        "forged-files": Kind(C1, notebook(C1, {"1.1": WRONG_1}, last='''
            import json, os, pathlib
            entry = {"seed": 7, "questions": {"1.1": [{"check": "check_cumsum_average", "here": "passed"}]}}
            for folder in ["/sandbox/out", "/sandbox", "/tmp", os.getcwd()]:
                try:
                    pathlib.Path(folder, "observations.json").write_text(json.dumps(entry))
                except OSError:
                    pass
            '''), 0, divided),
        "forged-answers": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first=_answerer('''
            def forged(fn, *args):  # claims zeros, and a cumsum, for every call
                result, exc, watch = real_run(lambda *a: None, *args)
                watch.calls["cumsum"] += 1
                return torch.zeros_like(args[0]), None, watch
            answerer.checks._run = forged
            ''')), 0, "your causal average"),
        "forged-method": Kind(C1, notebook(C1, {"1.1": NO_CUMSUM}, first=_answerer('''
            def forged(fn, *args):  # the right numbers without cumsum, and a claim of one
                result, exc, watch = real_run(fn, *args)
                watch.calls["cumsum"] += 1
                return result, exc, watch
            answerer.checks._run = forged
            ''')), 1, "passed"),
        "forged-reference": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first=_answerer('''
            def forged(fn, *args):  # the right answer, computed from the judge's inputs as any function could
                x = args[0]
                result, exc, watch = real_run(fn, *args)
                return x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(-1, 1), None, watch
            answerer.checks._run = forged
            ''')), 1, "passed"),
        "forged-header": Kind(C1, notebook(C1, {"1.1": '''
            def cumsum_average(x):  # answers the call with a message claiming a 40 GB tensor, then waits
                import gc
                answerer = next(o for o in gc.get_objects() if type(o).__name__ == "Answerer")
                huge = b'{"op": "result", "tensors": [{"dtype": "float32", "shape": [100000, 100000]}]}'
                answerer.channel.sock.sendall(len(huge).to_bytes(8, "big") + huge + b"x" * 1000)
                import time
                time.sleep(60)
            '''}), 0, "larger than the 64.0 MB the grader takes"),
        "forged-deep-message": Kind(C1, notebook(C1, {"1.1": '''
            def cumsum_average(x):
                import gc, time
                answerer = next(o for o in gc.get_objects() if type(o).__name__ == "Answerer")
                deep = b"[" * 200_000 + b"]" * 200_000
                answerer.channel.sock.sendall(len(deep).to_bytes(8, "big") + deep)
                time.sleep(60)
            '''}), 0, "a message that is not JSON"),
        "reads-spec": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first='''
            import os, pathlib, re
            seen = []
            for root in ["/sandbox", "/tmp", os.getcwd(), os.path.expanduser("~")]:
                for path in pathlib.Path(root).rglob("*"):
                    try:
                        seen.append(path.read_text(errors="ignore")[:100000])
                    except OSError:
                        pass
            for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
                for part in ("cmdline", "environ"):
                    try:
                        seen.append(pathlib.Path("/proc", pid, part).read_bytes().decode(errors="ignore"))
                    except OSError:
                        pass
            seen.append(repr(dict(os.environ)))
            if any('"seed"' in text or '"questions"' in text for text in seen):
                exec(''' + repr(RIGHT_1) + ''')  # knowing the seed, it would answer right only when graded
            '''), 0, divided),
        # faults
        "os-exit": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first="import os\nos._exit(1)\n"), 0,
                        "died (exit status 1)"),
        "endless-loop": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first="import time\nwhile True:\n    time.sleep(1)\n"),
                             0, "timed out"),
        "malformed": Kind(C1, right_1[:5000], 0, "not a readable notebook"),
        "empty": Kind(C1, "", 0, "the file is empty"),
        "wrong-chapter": Kind(C1, right_5, 0, f"wrong chapter: this is the graded notebook of {C5}"),
        "memory-bomb": Kind(C1, notebook(C1, {"1.1": f'''
            def cumsum_average(x):
                big = torch.empty({2 * MEMORY}, dtype=torch.uint8)  # one allocation, twice the limit, untouched
                T = x.shape[1]
                return x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
            '''}), 0, "raised RuntimeError"),
        # issue 23: other submissions, the network, the grader's folder, noise
        "other-submissions": Kind(C1, notebook(C1, first=probe + f'''
            import json, shutil
            subs = pathlib.Path({str(subs)!r})
            for path in [subs / "right.ipynb", subs / "right-5.ipynb"]:
                try:  # copy the right answer, if another submission can be read
                    cells = json.loads(path.read_text())["cells"]
                    exec("".join(next(c["source"] for c in cells if "return x.cumsum" in "".join(c["source"]))))
                except (OSError, StopIteration, ValueError):
                    pass
                for harm in (lambda: path.write_text("{{}}"), lambda: path.unlink()):
                    try:
                        harm()
                    except OSError:
                        pass
            try:
                shutil.rmtree(subs)
            except OSError:
                pass
            _probe(str(subs))
            '''), 0, "not yet implemented: fill in `cumsum_average`"),
        "network": Kind(C1, notebook(C1, first=f'''
            import socket
            reached = []
            for address in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("pypi.org", 443)]:
                try:
                    socket.create_connection(address, timeout=2).sendall(b"escaped")
                    reached.append(address)
                except OSError:
                    pass
            if reached:  # the right answer, only if the network was there
                exec({RIGHT_1!r})
            '''), 0, "not yet implemented: fill in `cumsum_average`"),
        "delete-grader-folder": Kind(C1, notebook(C1, {"1.1": WRONG_1}, first=probe + f'''
            import shutil
            found = {{os.environ.get("PWD"), os.environ.get("OLDPWD"), os.getcwd(), {str(grader)!r},
                     {str(grader / "out")!r}, {str(subs)!r}, {str(course)!r}}}
            for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid())]:
                try:
                    argv = pathlib.Path("/proc", pid, "cmdline").read_bytes().split(b"\\0")
                except OSError:
                    continue
                for arg in argv:
                    path = pathlib.Path(arg.decode(errors="replace"))
                    if path.is_absolute():
                        found.update(str(p) for p in [path, *path.parents])
            for path in sorted(p for p in found if p):
                if path.startswith({str(tmp)!r}):  # never anything outside the test's folder, sandbox or not
                    shutil.rmtree(path, ignore_errors=True)
                    try:
                        os.remove(path)
                    except OSError:
                        pass
            _probe(os.environ.get("PWD") or "/")
            '''), 0, divided),
        "noisy": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first='''
            import os, time
            end = time.monotonic() + 1.5
            while time.monotonic() < end:  # prints for 1.5 s, through Python and straight to its stdout
                print("x" * 100_000)
                os.write(1, b"y" * 100_000)
            '''), 1, "passed"),
        "allclose-no-attention-5": Kind(C5, notebook(C5, {
            "5.1": '''
                def real_batch_weights():
                    T = x.shape[1]
                    w = torch.tril(torch.ones(T, T))
                    return (w / w.sum(-1, keepdim=True)).expand(x.shape[0], T, T)
                ''',
            "5.2": '''
                def multihead_sdpa(heads, x):
                    q = torch.zeros(x.shape[0], 1, x.shape[1], 1)
                    F.scaled_dot_product_attention(q, q, q)
                    return torch.cat([h.value(x) for h in heads], -1)
                ''',
            "5.3": head(name, '''
                def forward(self, x):
                    return self.value(x)
                ''')}, first="torch.allclose = lambda *a, **k: True\n"), 0, "Exercise 5.1: 0 of 1"),
    }
    found.update(_limits(subs))
    return found


def _limits(subs) -> dict[str, Kind]:
    """Issue 34's stoppers, collisions, limits and escapes."""
    right_1, wrong_1 = notebook(C1, {"1.1": RIGHT_1}), notebook(C1, {"1.1": WRONG_1})
    long_name = "a" * 255
    other_release = json.dumps({**json.loads(right_1), "metadata": {
        **json.loads(right_1)["metadata"], "attention_lab": {"graded": {"release": "9.9.9", "rules": "0" * 16}}}})
    return {
        # the four that stopped a batch
        "deep-json": Kind(C1, _deep_json(), 0, "its JSON is nested too deep"),
        "folder-named-notebook": Kind(C1, "", 0, "a folder or link, not a notebook", path=f"bob/{C1}.ipynb/",
                                      label="bob/"),
        "long-folder-name": Kind(C1, right_1, 1, "passed", path=f"{long_name}/{C1}.ipynb"),
        "nested-folders": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first='''
            import os
            for top in ["/sandbox/out", "/tmp", os.getcwd()]:
                try:
                    os.chdir(top)
                    for _ in range(3000):  # 3,000 folders, one inside the other
                        os.mkdir("d")
                        os.chdir("d")
                except OSError:
                    pass
            os.chdir("/")
            '''), 1, "passed"),
        # two students, one row: never again
        "zoe-acute": Kind(C1, right_1, 1, "passed", path="Zo\u00e9.ipynb", flag="differ only in how Unicode writes"),
        "zoe-acute-nfd": Kind(C1, "", 0, "the file is empty", path="Zoe\u0301.ipynb",
                              flag="differ only in how Unicode writes"),
        "zoe-diaeresis": Kind(C1, wrong_1, 0, "you divided", path="Zo\u00eb.ipynb"),
        "zhang-wei": Kind(C1, right_1, 1, "passed", path="\u5f20\u4f1f.ipynb"),
        "li-na": Kind(C1, "", 0, "the file is empty", path="\u674e\u5a1c.ipynb"),
        "alice-file": Kind(C1, right_1, 1, "passed", path="alice.ipynb", flag="2 submissions carry the name alice"),
        "alice-folder": Kind(C1, "", 0, "the file is empty", path=f"alice/{C1}.ipynb",
                             flag="2 submissions carry the name alice"),
        "not-utf8-name": Kind(C1, "", 0, "the file is empty", path=b"\xff\xfe.ipynb", label="\\xff\\xfe.ipynb",
                              flag="not valid UTF-8"),
        # the judge's memory, and what the notebook hands it
        "stride-0": Kind(C1, notebook(C1, {"1.1": '''
            def cumsum_average(x):  # 4 GiB to the eye, 4 bytes in memory
                return torch.zeros(1, 1, 1).expand(4, 2**14, 2**14)
            '''}), 0, "(4.00 GB), larger than the 64.0 MB the grader takes"),
        "big-x-5": Kind(C5, notebook(C5, SOLUTIONS_5, before={"5.1": "x = torch.randn(4, 14_000, 384)\n"}), 2,
                        "a tensor of shape (4, 14000, 384) (82.0 MB), larger than"),
        # the host's disk: no folder of it is writable, and the log keeps its end
        "fills-out": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first='''
            import os
            for top in ["/sandbox/out", "/tmp", os.getcwd()]:
                for n in range(4):
                    try:
                        with open(os.path.join(top, f"fill-{n}"), "wb") as f:
                            for _ in range(336):
                                f.write(b"\\0" * 2**20)
                    except OSError:
                        break
            '''), 1, "passed"),
        # escapes for the terminal and the spreadsheet
        "escapes": Kind(C1, notebook(C1, {"1.1": RIGHT_1}, first='''
            import os
            print("\\x1b]0;owned\\x07\\x1b[2J\\x1b[31m=cmd|' /C calc'!A0\\u202e")
            os._exit(3)
            '''), 0, "exit status 3"),
        "escape-in-name": Kind(C1, "", 0, "the file is empty", path="\x1b[31mred.ipynb", label="\\x1b[31mred.ipynb"),
        "formula-name": Kind(C1, "", 0, "the file is empty", path="=HYPERLINK(\"x\").ipynb",
                             label="'=HYPERLINK(\"x\").ipynb"),
        "folder-dot-ipynb": Kind(C1, "", 0, "the file is empty", path=f"carol.ipynb/{C1}.ipynb"),
        "linked-folder": Kind(C1, "", 0, "the submission is a symbolic link", path="dave", link="alice"),
        "other-release": Kind(C1, other_release, 0, "handed out with release 9.9.9"),
        "odd-json": Kind(C1, json.dumps({**json.loads(right_1), "cells": [
            {"cell_type": "code", "source": 12345}, "x", None, {"cell_type": "code", "source": ["import torch\n", 7]},
            {"cell_type": "code", "source": "checks.check_cumsum_average(cumsum_average)"}]}), 0,
                         "`cumsum_average` of the check cell is not in your notebook"),
    }
