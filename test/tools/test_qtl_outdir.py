"""qtl never deletes or overwrites what it did not write (staged_output.hpp, demo.cpp).

Usage: test_qtl_outdir.py QTL

Every folder case checks the whole folder (every path and every byte) before and after.
  1. OUT_DIR holding files that are not a checkpoint's is refused (quantize, convert), naming
     them, and left whole; --force replaces it; a folder of checkpoint files only, or an earlier
     output (its `.qtl-output` marker), is replaced; the marker names the command
  2. an input file that resolves into OUT_DIR (symlinked shard, index, side file) is refused and
     OUT_DIR left whole; an output folder inside the input folder still works
  3. `qtl demo --out`: refused unless new, empty or an earlier demo's; --force writes and keeps
     the other files; --out naming a file is a clear error
  4. SIGINT/SIGTERM/SIGHUP (and SIGBUS) into a new OUT_DIR leave no folder; OUT_DIR names up to
     NAME_MAX work and their debris is cleaned; a run cleans the SIGKILL debris of every folder of
     its parent (a moved-aside old output only once its folder exists again); the messages name
     the command that runs
Standard library only.
"""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, run_in_temp_dir  # noqa: E402
from test_qtl_commit import ARGS_A, ARGS_B, make_input, run, snapshot  # noqa: E402

QTL = sys.argv[1]
DEBRIS_KINDS = (".qtl-new-", ".qtl-old-")


def debris(parent):
    """The hidden staging and old folders of runs in `parent`."""
    out = []
    for f in sorted(os.listdir(parent)):
        head, sep, pid = f.rpartition(".qtl-")
        if f.startswith(".") and head and pid[:4] in ("new-", "old-") and pid[4:].isdigit():
            out.append(f)
    return out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


class Env:
    pass


def setup(tmp):
    e = Env()
    e.in_a = os.path.join(tmp, "in-a")  # two shards and an index
    e.in_b = os.path.join(tmp, "in-b")  # one file
    make_input(e.in_a, 1, shards=2)
    make_input(e.in_b, 2, shards=1)
    e.ref_a = os.path.join(tmp, "ref-a")
    e.ref_b = os.path.join(tmp, "ref-b")
    for src, out, args in ((e.in_a, e.ref_a, ARGS_A), (e.in_b, e.ref_b, ARGS_B)):
        rc, _, err = run("quantize", src, out, *args)
        check(rc == 0, "reference %s: %s" % (out, err))
    e.a = snapshot(e.ref_a)
    e.b = snapshot(e.ref_b)
    # an FP8-block checkpoint for qtl convert
    e.fp8 = os.path.join(tmp, "fp8-block")
    rc, _, err = run("quantize", e.in_b, e.fp8, "--format", "fp8", "--fp8-scheme", "block")
    check(rc == 0, "the FP8-block input of convert: " + err)
    return e


def refused_whole(args, folder, words, what):
    """Runs qtl `args`; expects exit 2 naming `words` and `folder` exactly as it was."""
    before = snapshot(folder)
    rc, _, err = run(*args)
    check(rc == 2 and all(w in err for w in words), "%s: exit 2 naming %s: %d %s" % (what, words, rc, err))
    check(snapshot(folder) == before, "%s: the folder is left whole: %s" % (what, sorted(snapshot(folder) or {})))
    check(debris(os.path.dirname(folder)) == [], "%s: nothing hidden left: %s" % (what, debris(os.path.dirname(folder))))
    return err


def make_project(folder):
    """The folder of the report: a config.json of another tool, docs/ and notes."""
    shutil.rmtree(folder, ignore_errors=True)
    write(os.path.join(folder, "config.json"), '{"eslint": true}')
    write(os.path.join(folder, "docs", "thesis.tex"), "t")
    write(os.path.join(folder, "notes.txt"), "n")


def marker(folder):
    """The `.qtl-output` marker of `folder` ({} when there is none)."""
    try:
        with open(os.path.join(folder, ".qtl-output")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def test_foreign_files(tmp, e):
    """1. Only an empty folder, an earlier output or a folder of checkpoint files is replaced."""
    proj = os.path.join(tmp, "proj")
    make_project(proj)
    # config.json is a checkpoint's file: not named as in the way
    refused_whole(["quantize", e.in_b, proj, *ARGS_B], proj, [proj, "holds docs/, notes.txt (not a checkpoint's files)", "--force", "qtl quantize"],
                  "quantize into a project")
    err = refused_whole(["convert", e.fp8, proj, "--to", "bf16"], proj, [proj, "docs/", "notes.txt", "qtl convert"],
                        "convert into a project")
    check("quantize" not in err, "convert's refusal names convert only: " + err)
    # five entries in the way: the first three (sorted) and how many more
    many = os.path.join(tmp, "many")
    for name in ("README.md", "a.txt", "b.txt", "c.txt", "model.safetensors/x"):
        write(os.path.join(many, name), "x")
    refused_whole(["quantize", e.in_b, many, *ARGS_B], many, ["README.md, a.txt, b.txt and 2 more"], "five in the way")
    only_dir = os.path.join(tmp, "only-dir")
    write(os.path.join(only_dir, "model.safetensors", "x"), "x")
    refused_whole(["quantize", e.in_b, only_dir, *ARGS_B], only_dir, ["model.safetensors/"],
                  "a folder named like a shard")
    # a marker of something else (a demo, another tool, not JSON) does not make a folder qtl's
    for text in ('{"tool": "qtl", "command": "demo", "content": "demo"}', '{"tool": "other", "content": "checkpoint"}',
                 "not json"):
        fake = os.path.join(tmp, "fake-marker")
        shutil.rmtree(fake, ignore_errors=True)
        write(os.path.join(fake, ".qtl-output"), text)
        write(os.path.join(fake, "notes.txt"), "n")
        refused_whole(["quantize", e.in_b, fake, *ARGS_B], fake, ["notes.txt"], "marker %s" % text)
    # --force replaces the whole folder
    rc, _, err = run("quantize", e.in_b, proj, *ARGS_B, "--force")
    check(rc == 0 and snapshot(proj) == e.b, "--force replaces the project: %d %s %s" % (rc, err, sorted(snapshot(proj))))
    make_project(proj)
    rc, _, err = run("convert", e.fp8, proj, "--to", "bf16", "--force")
    check(rc == 0 and "notes.txt" not in snapshot(proj) and marker(proj)["command"] == "convert",
          "convert --force: %d %s" % (rc, err))
    # what may be replaced: empty, checkpoint files only (no marker), an earlier output (marker)
    ckpt_only = os.path.join(tmp, "ckpt-only")
    for name in ("config.json", "model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                 "tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
                 "quantize_config.json", "merges.txt", "chat_template.jinja"):
        write(os.path.join(ckpt_only, name), "{}")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    earlier = os.path.join(tmp, "earlier")
    shutil.copytree(e.ref_a, earlier)
    write(os.path.join(earlier, "notes", "added-later.txt"), "x")
    for folder, what in ((ckpt_only, "checkpoint files only"), (empty, "an empty folder"), (earlier, "an earlier output")):
        rc, _, err = run("quantize", e.in_b, folder, *ARGS_B)
        check(rc == 0 and snapshot(folder) == e.b, "%s is replaced: %d %s %s" % (what, rc, err, sorted(snapshot(folder))))
    # the marker
    m = marker(e.ref_b)
    rc, version, _ = run("--version")
    check(m.get("tool") == "qtl" and m.get("command") == "quantize" and m.get("content") == "checkpoint" and
          m.get("version") and m["version"] in version, "the marker of a quantize output: %s (%s)" % (m, version))
    convert_out = os.path.join(tmp, "convert-out")
    rc, _, err = run("convert", e.fp8, convert_out, "--to", "bf16")
    check(rc == 0 and marker(convert_out)["command"] == "convert", "the marker of a convert output: " + err)
    # a convert output may be converted again from and into: the marker is not copied as a side file
    rc, _, err = run("convert", e.fp8, convert_out, "--to", "fp8-ue8m0")
    check(rc == 0 and marker(convert_out)["command"] == "convert", "convert over a convert output: " + err)


def test_symlinked_inputs(tmp, e):
    """2. The output folder must not hold an input file, wherever the input's path points."""
    # the report: B's files are links to A's; quantize B into A
    def linked_copy(src, sym):
        a, b = os.path.join(sym, "A"), os.path.join(sym, "B")
        shutil.copytree(src, a)
        os.makedirs(b)
        for f in os.listdir(a):
            os.symlink(os.path.join("..", "A", f), os.path.join(b, f))
        return a, b

    a, b = linked_copy(e.in_b, os.path.join(tmp, "sym"))
    refused_whole(["quantize", b, a, "--format", "fp8"], a, ["holds the input " + a + os.sep], "input links into OUT_DIR")
    fa, fb = linked_copy(e.fp8, os.path.join(tmp, "sym-fp8"))
    refused_whole(["convert", fb, fa, "--to", "bf16"], fa, ["holds the input " + fa + os.sep],
                  "convert: input links into OUT_DIR")
    # one link among real files: a shard, the index (also given as the input path), a side file
    for linked, given in (("model-00002-of-00002.safetensors", ""), ("model.safetensors.index.json", ""),
                          ("model.safetensors.index.json", "model.safetensors.index.json"), ("tokenizer.json", "")):
        out = os.path.join(tmp, "sym-out")
        src = os.path.join(tmp, "sym-in")
        for d in (out, src):
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(e.in_a, d)
        os.remove(os.path.join(src, linked))
        os.symlink(os.path.join(out, linked), os.path.join(src, linked))
        refused_whole(["quantize", os.path.join(src, given), out, *ARGS_B], out,
                      ["holds the input", os.path.join(out, linked)], "%s linked into OUT_DIR (input %s)" % (linked, given or "the folder"))
    check(os.path.islink(os.path.join(src, linked)), "the input is untouched")
    # links out of the input folder to a third place are fine, and so is OUT_DIR inside the input folder
    rc, _, err = run("quantize", b, os.path.join(tmp, "from-links"), *ARGS_B)
    check(rc == 0, "linked input, another output folder: " + err)
    nest = os.path.join(tmp, "nest")
    shutil.copytree(e.in_b, nest)
    before = snapshot(nest)
    rc, _, err = run("quantize", nest, os.path.join(nest, "out"), *ARGS_B)
    check(rc == 0 and snapshot(os.path.join(nest, "out")) == e.b, "OUT_DIR inside the input folder: " + err)
    shutil.rmtree(os.path.join(nest, "out"))
    check(snapshot(nest) == before, "and the input folder is unchanged")


def test_demo(tmp, e):
    """3. demo --out writes only into a new, empty or earlier demo's folder (or with --force)."""
    demo = os.path.join(tmp, "demo")
    write(os.path.join(demo, "gptq_config.json"), '{"mine": true}')
    write(os.path.join(demo, "model", "notes.txt"), "n")
    refused_whole(["demo", "--out", demo], demo, [demo, "gptq_config.json", "model/", "--force"], "demo into a folder")
    refused_whole(["demo", "--out", e.ref_b], e.ref_b, ["config.json", "model.safetensors"],
                  "demo into a quantize output")
    rc, so, err = run("demo", "--out", demo, "--force")
    with open(os.path.join(demo, "model", "notes.txt")) as f:
        kept = f.read() == "n"
    check(rc == 0 and kept, "demo --force writes and keeps the other files: %d %s" % (rc, err))
    fresh = os.path.join(tmp, "demo-new")
    rc, so, err = run("demo", "--out", fresh)
    check(rc == 0 and marker(fresh).get("content") == "demo", "demo into a new folder, marked: %d %s" % (rc, err))
    write(os.path.join(fresh, "gptq-int4", "notes.txt"), "n")  # inside its quantize output: replaced
    rc, so, err = run("demo", "--out", fresh)
    check(rc == 0 and not os.path.exists(os.path.join(fresh, "gptq-int4", "notes.txt")),
          "demo again into its own folder: %d %s" % (rc, err))
    empty = os.path.join(tmp, "demo-empty")
    os.makedirs(empty)
    rc, so, err = run("demo", "--out", empty)
    check(rc == 0, "demo into an empty folder: " + err)
    # --out naming a file: a message, not the library's "filesystem error"
    afile = os.path.join(tmp, "a-file")
    write(afile, "x")
    for out in (afile, os.path.join(afile, "sub")):
        rc, _, err = run("demo", "--out", out)
        check(rc == 2 and err.startswith("qtl: error: " + out) and "filesystem error" not in err,
              "demo --out %s: a clear message: %d %s" % (out, rc, err))
    with open(afile) as f:
        check(f.read() == "x", "the file is untouched")


def stop_and_signal(args, sig, meanwhile=None):
    """Runs qtl `args` stopped at the `reading` hook, then sends `sig` (after `meanwhile()`)."""
    env = dict(os.environ, QTL_TEST_STOP_AT="reading:STOP")
    p = subprocess.Popen([QTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status = os.waitpid(p.pid, os.WUNTRACED)  # a stop is reported, the child is not reaped
    stopped = os.WIFSTOPPED(status)
    if stopped:
        if meanwhile:
            meanwhile()
        if sig is not None:
            os.kill(p.pid, sig)
        os.kill(p.pid, signal.SIGCONT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    return stopped, p.returncode, err


def test_signals(tmp, e):
    """4a. A run stopped by a signal leaves no folder it created, and keeps one it did not."""
    parent = os.path.join(tmp, "sig")
    os.makedirs(parent)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        for cmd in (["quantize", e.in_b], ["convert", e.fp8]):
            out = os.path.join(parent, "new-out")
            tail = ARGS_B if cmd[0] == "quantize" else ["--to", "bf16"]
            stopped, rc, err = stop_and_signal(cmd + [out] + tail, sig)
            what = "%s killed by %s into a new folder" % (cmd[0], signal.Signals(sig).name)
            check(stopped and rc == -sig, what + ": died by it: %d %s" % (rc, err))
            check(not os.path.exists(out), what + ": the folder it created is gone")
            check(debris(parent) == [], what + ": nothing hidden left: %s" % debris(parent))
    # an existing empty folder and an earlier output stay as they were
    for what, make in (("empty", lambda d: os.makedirs(d)), ("earlier", lambda d: shutil.copytree(e.ref_a, d))):
        out = os.path.join(parent, what)
        make(out)
        before = snapshot(out)
        stopped, rc, err = stop_and_signal(["quantize", e.in_b, out] + ARGS_B, signal.SIGINT)
        check(stopped and rc == -signal.SIGINT and snapshot(out) == before, "SIGINT into %s: kept as it was" % what)
        check(debris(parent) == [], "SIGINT into %s: nothing hidden left" % what)
    # an input truncated while mapped (SIGBUS in a GPTQ job): exit 2 and no folder left either
    src = os.path.join(parent, "in")
    shutil.copytree(e.in_b, src)
    model = os.path.join(src, "model.safetensors")
    out = os.path.join(parent, "bus-out")
    stopped, rc, err = stop_and_signal(["quantize", src, out, "--threads", "1"] + ARGS_B, None,
                                       meanwhile=lambda: os.truncate(model, os.path.getsize(model) // 3))
    check(stopped and rc == 2 and "shrank" in err, "input truncated while mapped: exit 2: %d %s" % (rc, err))
    check(not os.path.exists(out) and debris(parent) == [], "input truncated: no folder left: %s" % os.listdir(parent))


def test_long_names(tmp, e):
    """4b. OUT_DIR names up to NAME_MAX: written, and their SIGKILL debris cleaned by the next run."""
    parent = os.path.join(tmp, "long")
    os.makedirs(parent)
    for n in (237, 238, 250, 255):
        out = os.path.join(parent, "o" * n)
        rc, _, err = run("quantize", e.in_b, out, *ARGS_B)
        check(rc == 0 and snapshot(out) == e.b, "a %d-byte OUT_DIR name: %d %s" % (n, rc, err))
        # killed after the swap (old output under the staging name) and before it
        for step in ("staged", "swapped"):
            shutil.rmtree(out)
            shutil.copytree(e.ref_a, out)
            rc, _, _ = run("quantize", e.in_b, out, *ARGS_B, env={"QTL_TEST_STOP_AT": step})
            left = debris(parent)
            check(rc == -signal.SIGKILL and len(left) == 1 and len(left[0].encode()) <= 255,
                  "%d bytes, killed at %s: one hidden folder of at most 255 bytes: %s" % (n, step, left))
            rc, _, err = run("quantize", e.in_b, out, *ARGS_B)
            check(rc == 0 and "removed" in err and debris(parent) == [] and snapshot(out) == e.b,
                  "%d bytes, killed at %s: the next run cleans up: %d %s %s" % (n, step, rc, err, debris(parent)))
        shutil.rmtree(out)
    # two long names alike in their first 240 bytes get different hidden names
    names = []
    for out in (os.path.join(parent, "p" * 240 + "x"), os.path.join(parent, "p" * 240 + "y")):
        shutil.copytree(e.ref_a, out)
        run("quantize", e.in_b, out, *ARGS_B, env={"QTL_TEST_STOP_AT": "staged"})
        names += [n.rsplit(".qtl-", 1)[0] for n in debris(parent)]
        rc, _, err = run("quantize", e.in_b, out, *ARGS_B)
        check(rc == 0 and snapshot(out) == e.b and debris(parent) == [], "long alike names: " + err)
    check(len(names) == 2 and names[0] != names[1], "distinct hidden names: %s" % names)
    # a name too long for the folder itself: a clear error, nothing left
    before = sorted(os.listdir(parent))
    rc, _, err = run("quantize", e.in_b, os.path.join(parent, "o" * 256), *ARGS_B)
    check(rc == 2 and "File name too long" in err and sorted(os.listdir(parent)) == before,
          "a 256-byte name: %d %s" % (rc, err))


def test_other_debris(tmp, e):
    """4c. A run cleans what killed runs left beside every folder of its parent, never more."""
    parent = os.path.join(tmp, "debris")
    os.makedirs(parent)
    x, y = os.path.join(parent, "x"), os.path.join(parent, "y")
    # killed before the swap (exchange) and after it (fallback): removed by a run into y
    for step, no_exchange, expect in (("staged", "", e.a), ("swapped", "1", e.b)):
        shutil.rmtree(x, ignore_errors=True)
        shutil.copytree(e.ref_a, x)
        env = {"QTL_TEST_STOP_AT": step}
        if no_exchange:
            env["QTL_TEST_NO_EXCHANGE"] = "1"
        rc, _, _ = run("quantize", e.in_b, x, *ARGS_B, env=env)
        check(rc == -signal.SIGKILL and len(debris(parent)) == 1, "x killed at %s: debris %s" % (step, debris(parent)))
        shutil.rmtree(y, ignore_errors=True)
        rc, _, err = run("quantize", e.in_b, y, *ARGS_B)
        check(rc == 0 and "qtl quantize: removed " + os.path.join(parent, ".x.qtl-") in err and debris(parent) == [],
              "x killed at %s: a run into y removes its debris: %s %s" % (step, err, debris(parent)))
        check(snapshot(x) == expect, "x killed at %s: x itself unchanged" % step)
    # killed between the fallback's renames: x missing, its old output the only copy: kept
    shutil.rmtree(x)
    shutil.copytree(e.ref_a, x)
    rc, _, _ = run("quantize", e.in_b, x, *ARGS_B, env={"QTL_TEST_STOP_AT": "aside", "QTL_TEST_NO_EXCHANGE": "1"})
    aside = [f for f in debris(parent) if ".qtl-old-" in f]
    check(rc == -signal.SIGKILL and not os.path.exists(x) and len(aside) == 1 and len(debris(parent)) == 2,
          "x killed aside: its staging and old folders: %s" % debris(parent))
    rc, _, err = run("quantize", e.in_b, y, *ARGS_B)
    check(rc == 0 and debris(parent) == aside and not os.path.exists(x),
          "a run into y removes x's staging, keeps x's only copy: %s %s" % (err, debris(parent)))
    rc, _, err = run("quantize", e.in_b, x, *ARGS_B)
    check(rc == 0 and "put back" in err and snapshot(x) == e.b and debris(parent) == [],
          "a run into x puts it back, then replaces it: " + err)
    # what is not a dead run's hidden folder stays
    live = ".x.qtl-new-%d" % os.getpid()
    keep = [".x.qtl-new-abc", live, ".qtl-new-%d" % dead_pid(), ".x.qtl-new-%d-1" % dead_pid(), ".x.qtl-tmp-%d" % dead_pid()]
    for k in keep:
        os.makedirs(os.path.join(parent, k))
    afile = ".z.qtl-new-%d" % dead_pid()
    write(os.path.join(parent, afile), "a file")
    before = snapshot(parent)
    rc, _, err = run("quantize", e.in_b, y, *ARGS_B)
    check(rc == 0 and "removed" not in err, "nothing of a dead run: nothing removed: " + err)
    after = snapshot(parent)
    check(all(k + "/" in after for k in keep) and after.get(afile) == b"a file" and
          {k: v for k, v in before.items() if not k.startswith("y")} == {k: v for k, v in after.items() if not k.startswith("y")},
          "other hidden names stay: %s" % sorted(set(before) ^ set(after)))


def test_messages(tmp, e):
    """4d. The lock and cleanup messages name the command that runs (or none)."""
    parent = os.path.join(tmp, "msg")
    os.makedirs(parent)
    out = os.path.join(parent, "out")
    shutil.copytree(e.ref_b, out)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for args in (["convert", e.fp8, out, "--to", "bf16"], ["quantize", e.in_b, out, *ARGS_B]):
            err = refused_whole(args, out, ["another qtl run is writing this folder"], args[0] + " into a locked folder")
            check("qtl quantize" not in err, "the lock message names no command: " + err)
    finally:
        os.close(fd)
    conv = os.path.join(parent, "conv")
    rc, _, _ = run("quantize", e.in_b, conv, *ARGS_B, env={"QTL_TEST_STOP_AT": "staged"})
    rc, _, err = run("convert", e.fp8, conv, "--to", "bf16")
    check(rc == 0 and "qtl convert: removed" in err and "quantize" not in err, "convert's cleanup note: " + err)


def main():
    def tests(tmp):
        e = setup(tmp)
        for test in (test_foreign_files, test_symlinked_inputs, test_demo, test_signals, test_long_names,
                     test_other_debris, test_messages):
            try:
                test(tmp, e)
            except Exception as x:  # an expectation the script could not even evaluate
                check(False, "%s: %s: %s" % (test.__name__, type(x).__name__, x))
    run_in_temp_dir("qtl-outdir-test-", tests)


if __name__ == "__main__":
    main()
