"""make gpu-check-full's steps (tests/gpu_check_plan.py lists them): the paper-size runs of stages
e-h, and the data every tier's runs read (installed or carried where it is, else written here).
They report what they find and decide nothing about the defaults (the verdict reads stages a, c, d).
"""
import os
import re

from gpu_check_read import metrics, last_eval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the tiny model of the short runs, and of every run in a rehearsal
TINY = "--width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 --batch 32".split()


# ---- the data ------------------------------------------------------------------------------------

def image_task(check):
    """Fashion-MNIST where installed or carried (data/fashion-mnist), else two classes of 8x8 BMP
    images written here."""
    for d in (os.environ.get("FASHION_DIR", ""), "data/fashion-mnist", "/usr/share/datasets/fashion-mnist"):
        if d and os.path.exists(os.path.join(ROOT, d, "t10k-labels-idx1-ubyte.gz")):
            return ["--task", "fashion-mnist", "--data-dir", d, "--patch", "7"]
    folder = check.path("tiny-images")
    for split, count in (("train", 8), ("test", 4)):
        for c in range(2):
            os.makedirs(os.path.join(folder, split, "c%d" % c), exist_ok=True)
            for i in range(count):
                pixels = bytes((40 + 150 * c + 7 * i + j) % 256 for j in range(8 * 8 * 3))
                head = b"BM" + (54 + len(pixels)).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
                info = b"".join(v.to_bytes(n, "little") for v, n in ((40, 4), (8, 4), (8, 4), (1, 2), (24, 2),
                                (0, 4), (len(pixels), 4), (2835, 4), (2835, 4), (0, 4), (0, 4)))
                open(os.path.join(folder, split, "c%d" % c, "%d.bmp" % i), "wb").write(head + info + pixels)
    return ["--task", "images", "--data-dir", folder, "--patch", "4"]


def vision_task(check):
    cifar = os.environ.get("CIFAR10_DIR", "data/cifar10-jpeg")
    if os.path.exists(os.path.join(ROOT, cifar, "data_batch_1.bin")):
        return ["--task", "cifar10", "--data-dir", cifar]
    if os.path.isdir(os.path.join(ROOT, cifar, "train")):
        return ["--task", "images", "--data-dir", cifar]
    return image_task(check)[:4]


def text_task(check, real=False):
    """$LM_DIR (default data/tinystories-sample-bpe1024); for a short run or a rehearsal, else the
    fixture text as bytes; for a real LM run without the folder, none."""
    folder = os.environ.get("LM_DIR", "data/tinystories-sample-bpe1024")
    if not os.path.exists(os.path.join(ROOT, folder, "train.bin")):
        if real and not check.rehearse:
            return []
        folder = check.path("tiny-text")
        check.output([check.python, "data/prepare_text.py", "--input", "tests/fixtures/text/tiny.txt", "--out",
                      folder, "--tokenizer", "bytes"])
        if not os.path.exists(os.path.join(folder, "train.bin")):
            return []
    return ["--task", "lm", "--data-dir", folder] + ([] if real else ["--seq-len", "16", "--eval-windows", "8"])


# ---- stages e-h: the paper-size runs -------------------------------------------------------------

def table_runs(lines, root, check, jobs):
    """Runs the table's `lines` ("FOLDER FLAGS", experiments/run_many.sh's) under root, JOBS at once,
    in their order, until the step's limit; in a rehearsal each at the tiny size for 6 steps."""
    out = []
    for line in lines:
        folder, flags = line.split(" ", 1)
        if check.rehearse:
            flags = re.sub(r"--(epochs|steps) \d+", "", flags) + " " + " ".join(TINY) + " --steps 6 --eval-every 6"
        out.append(os.path.join(root, os.path.basename(folder)) + " " + flags)
    with open(check.path(os.path.basename(root) + "-runs.txt"), "w") as f:
        f.write("\n".join(out) + "\n")
    return check.run(["sh", "-c", "sh experiments/run_many.sh < '%s'" % f.name], os.path.basename(root) + ".log",
                     env={"JOBS": str(jobs)})


def paper_boolean(check):
    """make table-boolean BOOLEAN_ARGS=--paper's runs, 2parity and maj3 first, mask and default first,
    seeds 1-3, three at once on the one GPU (docs/gpu.md says why three), for as long as the limit
    holds; then the table from the runs that finished (tools/boolean_table.py)."""
    listed = check.output(["sh", "experiments/boolean_table.sh", "--paper"], env={"SCHEDULER": "list"}).split("\n")
    rank = lambda line: (("2parity" not in line and "maj3" not in line),
                         not re.search(r"-(mask|default)-s", line), int(line.rsplit("--seed ", 1)[1]),
                         "maj3" in line, "-default-" in line)
    lines = sorted([line for line in listed if line.strip()], key=rank)
    if check.rehearse:
        lines = lines[:6]
    root = check.path("table-boolean-paper")
    rc = table_runs(lines, root, check, jobs=3)
    finished = [d for d in sorted(os.listdir(root)) if os.path.exists(os.path.join(root, d, "metrics.json"))] \
        if os.path.isdir(root) else []
    for d in finished:  # what the table is made of is read here, through the driver's reader
        check.open_output(os.path.join(root, d, "metrics.json")).close()
    table = check.output([check.python, "tools/boolean_table.py", root]) if finished else ""
    check.tables("the Boolean table at GOTU's size: the %d runs that finished of %d" % (len(finished), len(lines)),
                 table)
    detail = "%d of %d runs finished (%s); the table in tables.txt" % (len(finished), len(lines),
                                                                      " ".join(finished) or "none")
    if rc not in (0, 124):
        return [check.failed("Boolean table, GOTU's size", rc, os.path.basename(root) + ".log")]
    return [check.row("Boolean table, GOTU's size", "ok" if finished else "did not finish", detail)]


ADD3 = "--task add3 --data-frac 0.004 --steps 300 --eval-every 300"
MUL2 = "--task mul2 --data-frac 0.03 --steps 5000 --eval-every 500 --max-test 10000"
LEE = "--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --batch 256 --lr 1e-3 --wd 1e-3 --seed 1"


def paper_arithmetic(check):
    """Lee et al.'s size: add3 at 0.4% of the pairs for 300 steps, then mul2 at 3% for the paper's
    5000 steps (the scorecard's "does not" for mul2 was measured at C 64, L 2), default and mask,
    two at once; a mul2 run cut by the limit reports its last evaluation; a metric that is not a
    number (null in metrics.json) fails its row."""
    runs = [("add3-" + init, ADD3, init) for init in ("default", "mask")] + \
           [("mul2-" + init, MUL2, init) for init in ("default", "mask")]
    root = check.path("arithmetic-lee")
    rc = table_runs(["%s %s %s --init %s" % (name, task, LEE, init) for name, task, init in runs], root, check, 2)
    rows = []
    for name, _, _ in runs:
        folder = os.path.join(root, name)
        if os.path.exists(os.path.join(folder, "metrics.json")):
            text, not_numbers = metrics(check, folder, "seq_acc", "digit_acc", "prior_mass")
            rows.append(check.row("%s at Lee et al.'s size" % name, "FAILED" if not_numbers else "ok",
                                  ("not a number: %s; " % ", ".join(not_numbers) if not_numbers else "") + text))
        elif rc in (0, 124):
            rows.append(check.row("%s at Lee et al.'s size" % name, "did not finish",
                                  last_eval(check, folder, "seq_acc", "digit_acc")))
        else:
            rows.append(check.failed("%s at Lee et al.'s size" % name, rc, "arithmetic-lee.log"))
    return rows


def run_row(check, name, rc, log, folder, *keys):
    """A run's row: FAILED with its tail, FAILED where a metric is not a number, else its metrics"""
    if rc != 0:
        return check.failed(name, rc, log)
    text, not_numbers = metrics(check, folder, *keys)
    if not_numbers:
        return check.row(name, "FAILED", "not a number: %s; %s" % (", ".join(not_numbers), text))
    return check.row(name, "ok", text)


def paper_vision(check):
    """ViT-Tiny (C 192, L 12, NH 3, HS 64, MLP 768, patch 4), mask init, batch 128, 300 steps."""
    task = vision_task(check)
    size = TINY + ["--patch", "7", "--steps", "6", "--eval-every", "6"] if check.rehearse else \
        ("--width 192 --layers 12 --heads 3 --head-size 64 --mlp 768 --patch 4 --batch 128 --steps 300 "
         "--eval-every 300 --log-every 100").split()
    out = check.path("vit-tiny-mask")
    rc = check.run(check.cmd("maskprior", task + ["--device", "cuda", "--init", "mask"] + size + ["--out", out]),
                   "vit.log")
    return [run_row(check, "ViT-Tiny mask (%s)" % task[1], rc, "vit.log", out, "acc", "train_acc", "prior_mass")]


def paper_language(check):
    """A language model (C 384, L 6, NH 6, HS 64, MLP 1536, T 256, batch 64), the ALiBi-shaped mask,
    300 steps, then 100 sampled tokens."""
    task = text_task(check, real=True)
    if not task:
        return [check.row("LM mask-alibi", "skipped", "no token folder (data/prepare_text.py)")]
    size = TINY + ["--seq-len", "16", "--eval-windows", "8", "--steps", "6", "--eval-every", "6"] if check.rehearse \
        else ("--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --seq-len 256 --batch 64 --steps 300 "
              "--eval-every 300 --eval-windows 128 --log-every 100").split()
    out = check.path("lm-alibi")
    rc = check.run(check.cmd("maskprior", task + ["--device", "cuda", "--init", "mask", "--mask-prior", "alibi"] +
                             size + ["--out", out]), "lm.log")
    row = run_row(check, "LM mask-alibi", rc, "lm.log", out, "val_loss", "bits_per_byte", "prior_mass")
    if row["status"] != "ok":
        return [row]
    sample = check.run(check.cmd("maskprior", ["--generate", os.path.join(out, "model.safetensors"), "--prompt",
                                               "Once upon a time", "--sample-tokens", "100", "--top-k", "40",
                                               "--temperature", "0.8"]), "lm-sample.txt")
    row["detail"] += "; 100 tokens sampled (lm-sample.txt)" if sample == 0 else "; sampling FAILED"
    return [row]


def large_logits(check):
    rc = check.run(["./tests/unit_tests", "--no-intro=true", "-tc=*past 2^31*"], "large.log",
                   env={"MASKPRIOR_LARGE_TESTS": "1"})
    return [check.doctest_row("logits past 2^31 floats", "large.log", rc)]
