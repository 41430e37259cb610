#!/usr/bin/python3
"""The bad-input corpus: several hundred inputs lrcnn must refuse cleanly, and the check that it does.

    /usr/bin/python3 tests/bad/run.py path/to/lrcnn [--list] [--class NAME] [--table]

Every case is a command line of lrcnn with one thing wrong in it — a malformed or huge net file,
plan, spec, option, HDF5 file or image, or an output it must not write — built here from a valid
base by one mutation (the cases are data below; their input files are written into a temporary
directory when the corpus runs). A case passes when lrcnn exits with status 2 within TIMEOUT
seconds, prints exactly one line on stderr (with the expected words, where the case names them),
no sanitizer report, and writes nothing: no output file, no temporary left beside it, an existing
file untouched. Prints one line per failing case and a table per input class: cases, clean exit
2, findings. Exit status 0 when every case passed.
"""
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile

TIMEOUT = 60  # seconds; a hang is a finding

# --------------------------------------------------------------------------------------------
# Valid bases the mutations start from

NET = """net small
input data c=3 h=32 w=32
conv c1 c=8 k=3 p=1
relu r1
maxpool p1 k=2 s=2
conv c2 c=16 k=3 s=1 p=1 d=1 bias=1
bn b2 eps=1e-5 momentum=0.1
relu r2
conv c3 c=16 k=3 p=1
add a3 in=r2,c3
relu r3
avgpool q3 k=2 s=2 p=0
apool ap o=4
fc f4 c=32 bias=1
relu r4
gap g5 in=r3
fc f5 c=10 in=g5
loss l
"""

SPEC = """name = bad
nets = vgg-small
image = 32
batch = 2
optimizer = sgd
plans = layer, 2ps:2
"""

# Values no count, size or flag may take.
BAD_INTS = ["0", "-1", "abc", "1.5", "", "2147483648", "99999999999999999999", "1e30", "0x10", "+", "nan"]


def net_cases():
    out = []
    lines = NET.splitlines()
    # every key of every layer with every bad value
    for i, line in enumerate(lines):
        toks = line.split()
        for j, tok in enumerate(toks[2:], 2):
            if "=" not in tok or tok.startswith("in="):
                continue
            key = tok.split("=", 1)[0]
            for v in BAD_INTS[:8] if key not in ("eps", "momentum") else ["-1", "abc", "nan", "inf", "1e400"]:
                if key in ("p",) and v == "0":
                    continue  # padding 0 is valid
                if key == "bias" and v in ("0",):
                    continue
                t = list(toks)
                t[j] = "%s=%s" % (key, v)
                out.append(("net: %s %s=%s" % (toks[1], key, v or "(empty)"), "\n".join(lines[:i] + [" ".join(t)] + lines[i + 1:]), None))
    whole = [
        ("empty file", "", None),
        ("only comments", "# nothing\n# here\n", None),
        ("binary junk", "\x00\x01\x02\xff\xfe garbage \x7f\n", None),
        ("no input layer", "\n".join(l for l in lines if not l.startswith("input")), None),
        ("no loss layer", "\n".join(l for l in lines if not l.startswith("loss")), None),
        ("two input layers", NET.replace("conv c1", "input d2 c=3 h=8 w=8\nconv c1"), None),
        ("unknown kind", NET.replace("relu r1", "swish r1"), "swish"),
        ("unknown key", NET.replace("conv c1 c=8", "conv c1 c=8 kernel=3"), "kernel"),
        ("duplicate name", NET.replace("relu r2", "relu r1"), "r1"),
        ("unknown input", NET.replace("in=r2,c3", "in=r2,nosuch"), "nosuch"),
        ("self cycle", NET.replace("relu r4", "relu r4 in=r4"), None),
        ("two-layer cycle", NET.replace("relu r4", "relu r4 in=r5\nrelu r5 in=r4"), None),
        ("add with one input", NET.replace("in=r2,c3", "in=r2"), None),
        ("add of three, the third of another shape", NET.replace("in=r2,c3", "in=r2,c3,p1"), None),
        ("add of 65 inputs", NET.replace("in=r2,c3", "in=" + ",".join(["r2", "c3"] * 32 + ["c2"])), None),
        ("add of different shapes", NET.replace("in=r2,c3", "in=r1,c3"), None),
        ("relu with two inputs", NET.replace("relu r4", "relu r4 in=f4,f4"), None),
        ("sigmoid with two inputs", NET.replace("relu r4", "sigmoid r4 in=f4,f4"), None),
        ("relu6 with a key", NET.replace("relu r1", "relu6 r1 slope=0.1"), "slope"),
        ("leakyrelu slope -0.1", NET.replace("relu r1", "leakyrelu r1 slope=-0.1"), "slope"),
        ("leakyrelu slope abc", NET.replace("relu r1", "leakyrelu r1 slope=abc"), "slope"),
        ("leakyrelu slope nan", NET.replace("relu r1", "leakyrelu r1 slope=nan"), "slope"),
        ("gelu without a name", NET.replace("relu r1", "gelu"), None),
        ("upsample scale=0", NET.replace("relu r1", "upsample r1 scale=0"), "scale"),
        ("upsample scale=-2", NET.replace("relu r1", "upsample r1 scale=-2"), "scale"),
        ("upsample scale=1.5", NET.replace("relu r1", "upsample r1 scale=1.5"), "scale"),
        ("upsample scale huge", NET.replace("relu r1", "upsample r1 scale=2000000000"), None),
        ("upsample then add of the old size", NET.replace("relu r1", "upsample r1"), None),
        ("concat of different heights", NET.replace("add a3 in=r2,c3", "concat a3 in=r1,c3"), None),
        ("concat with one input", NET.replace("add a3 in=r2,c3", "concat a3 in=r2"), None),
        ("concat of three, the third of another height", NET.replace("add a3 in=r2,c3", "concat a3 in=r2,c3,r1"), None),
        ("concat of 65 inputs", NET.replace("add a3 in=r2,c3", "concat a3 in=" + ",".join(["r2"] * 65)), None),
        ("concat with an empty input name", NET.replace("add a3 in=r2,c3", "concat a3 in=r2,,c3"), None),
        ("mul of three", NET.replace("add a3 in=r2,c3", "mul a3 in=r2,c3,c2"), None),
        ("dropout sample=2", NET.replace("relu r1", "dropout r1 p=0.2 sample=2"), "sample"),
        ("dropout sample=-1", NET.replace("relu r1", "dropout r1 sample=-1"), "sample"),
        ("bilinear scale=0", NET.replace("relu r1", "bilinear r1 scale=0"), "scale"),
        ("bilinear align=2", NET.replace("relu r1", "bilinear r1 align=2"), "align"),
        ("bilinear with a kernel", NET.replace("relu r1", "bilinear r1 k=3"), "k"),
        ("gnorm without groups", NET.replace("relu r1", "gnorm r1"), "groups"),
        ("gnorm groups not dividing", NET.replace("relu r1", "gnorm r1 groups=3"), "groups"),
        ("gnorm with a momentum", NET.replace("relu r1", "gnorm r1 groups=2 momentum=0.1"), "momentum"),
        ("scale with a key", NET.replace("relu r1", "scale r1 c=8"), "c"),
        ("scale with two inputs", NET.replace("relu r1", "scale r1 in=c1,c1"), None),
        ("lnorm eps=-1", NET.replace("relu r1", "lnorm r1 eps=-1"), "eps"),
        ("lnorm with two inputs", NET.replace("relu r1", "lnorm r1 in=c1,c1"), None),
        ("conv k=3x", NET.replace("conv c1 c=8 k=3", "conv c1 c=8 k=3x"), "k"),
        ("conv k=x3", NET.replace("conv c1 c=8 k=3", "conv c1 c=8 k=x3"), "k"),
        ("conv k=3x0", NET.replace("conv c1 c=8 k=3", "conv c1 c=8 k=3x0"), "k"),
        ("conv k=3x3x3", NET.replace("conv c1 c=8 k=3", "conv c1 c=8 k=3x3x3"), "k"),
        ("conv p=1x-1", NET.replace("conv c1 c=8 k=3 p=1", "conv c1 c=8 k=3 p=1x-1"), "p"),
        ("conv k=1x40 past the width", NET.replace("conv c1 c=8 k=3 p=1", "conv c1 c=8 k=1x40"), None),
        ("maxpool k=2x1 (pools are square)", NET.replace("maxpool p1 k=2 s=2", "maxpool p1 k=2x1 s=2"), "k"),
        ("convt without c", NET.replace("relu r1", "convt r1 k=2 s=2"), "c"),
        ("convt without k", NET.replace("relu r1", "convt r1 c=8 s=2"), "k"),
        ("convt op as large as its stride", NET.replace("relu r1", "convt r1 c=8 k=3 s=2 p=1 op=2"), "op"),
        ("convt padding past its kernel", NET.replace("relu r1", "convt r1 c=8 k=3 s=2 p=3"), "padding"),
        ("convt groups not dividing", NET.replace("relu r1", "convt r1 c=8 k=2 s=2 groups=3"), "groups"),
        ("convt with two inputs", NET.replace("relu r1", "convt r1 c=8 k=2 in=c1,c1"), None),
        ("convt to 2^31 rows", NET.replace("relu r1", "convt r1 c=8 k=2 s=100000000"), None),
        ("mul of different sizes", NET.replace("add a3 in=r2,c3", "mul a3 in=r1,c3"), None),
        ("mul by a scale of other channels", NET.replace("add a3 in=r2,c3", "mul a3 in=r2,ap"), None),
        ("hardsigmoid with two inputs", NET.replace("relu r4", "hardsigmoid r4 in=f4,f4"), None),
        ("loss pixel=2", NET.replace("loss l", "loss l pixel=2"), "pixel"),
        ("loss pixel=yes", NET.replace("loss l", "loss l pixel=yes"), "pixel"),
        ("concat with a key", NET.replace("add a3 in=r2,c3", "concat a3 in=r2,c3 dim=1"), "dim"),
        ("conv missing c", NET.replace("conv c1 c=8 k=3", "conv c1 k=3"), None),
        ("conv missing k", NET.replace("conv c1 c=8 k=3", "conv c1 c=8"), None),
        ("apool missing o", NET.replace("apool ap o=4", "apool ap"), None),
        ("fc missing c", NET.replace("fc f4 c=32", "fc f4"), None),
        ("kernel larger than the input", NET.replace("conv c1 c=8 k=3 p=1", "conv c1 c=8 k=99"), None),
        ("pool window larger than its input", NET.replace("maxpool p1 k=2", "maxpool p1 k=64"), None),
        ("apool larger than its input", NET.replace("apool ap o=4", "apool ap o=64"), None),
        ("huge input", NET.replace("h=32 w=32", "h=2000000000 w=2000000000"), None),
        ("huge channels", NET.replace("conv c1 c=8", "conv c1 c=1000000000"), None),
        ("huge fc", NET.replace("fc f4 c=32", "fc f4 c=2000000000"), None),
        ("huge dilation", NET.replace("d=1", "d=100000000"), None),
        ("huge padding", NET.replace("conv c1 c=8 k=3 p=1", "conv c1 c=8 k=3 p=1000000000"), None),
        ("key without value", NET.replace("conv c1 c=8", "conv c1 c="), None),
        ("value without key", NET.replace("conv c1 c=8", "conv c1 =8"), None),
        ("a name with a slash", NET.replace("relu r1", "relu r/1"), None),
        ("a very long name", NET.replace("relu r1", "relu " + "r" * 5000), None),
        ("a 100 kB line", NET.replace("relu r1", "relu r1 " + "x" * 100000), None),
        ("net line without a name", "net\n" + NET.split("\n", 1)[1], None),
        ("the loss read by a layer", NET.replace("loss l", "loss l\nrelu after in=l"), None),
        ("a layer after nothing", "conv c0 c=3 k=3\n" + NET, None),
        ("bn momentum text", NET.replace("momentum=0.1", "momentum=fast"), None),
        ("input channels zero", NET.replace("c=3 h=32", "c=0 h=32"), None),
        ("input of size 1x1", NET.replace("h=32 w=32", "h=1 w=1"), None),
        ("stride larger than 2^31", NET.replace("s=1 p=1 d=1", "s=4294967297 p=1 d=1"), None),
    ]
    return [("net", label, ["sim", "--net", "{file}", "--plan", "layer", "-o", "{o}"], text, want) for label, text, want in out + whole]


def plan_cases():
    bad = [
        "", " ", "nosuch", "2ps", "2ps:", "2ps:0", "2ps:-1", "2ps:abc", "2ps:1.5", "2ps:99999999999", "2ps:100",
        "overl:0", "overl:100", "overl:1e9", "ckpt", "ckpt:0", "ckpt:-3", "ckpt:1000", "ckpt-sqrt:3",
        "layer:2", "vdnn", "vdnn-all:2", "2ps-h:0", "overl-h:-1", "authors-2ps", "authors-nosuch", "torch:2",
        "rows(2ps,2)", "rows(2ps,2)@", "rows(2ps,2)@conv1_1", "rows(2ps,2)@conv1_1..", "rows(2ps,2)@..pool1",
        "rows(2ps,2)@nosuch..pool1", "rows(2ps,2)@conv1_1..nosuch", "rows(2ps,2)@pool1..conv1_1",
        "rows(2ps,2)@conv1_1..fc4", "rows(nosuch,2)@conv1_1..pool1", "rows(2ps)@conv1_1..pool1",
        "rows(2ps,0)@conv1_1..pool1", "rows(2ps,1000)@conv1_1..pool1", "rows(2ps,fp=2,bp=4)@conv1_1..pool1",
        "rows(overl,fp=0,bp=2)@conv1_1..pool1", "rows(2ps,2,cuts=0,0)@conv1_1..pool1",
        "rows(2ps,2,cuts=5,5,5,5)@conv1_1..pool1", "rows(2ps,2,2)@conv1_1..pool1", "rows(2ps,2@conv1_1..pool1",
        "rows2ps,2)@conv1_1..pool1", "rows(2ps,2))@conv1_1..pool1", "ckpt@conv1_1..pool1; ckpt@conv1_1..pool1",
        "ckpt@conv2_1..pool2; ckpt@conv1_1..pool1", "ckpt@relu1_1..pool1", "offload(nosuch)@conv1_1..pool1",
        "offload(all)@conv1_1..nosuch", "layer@conv1_1..loss; layer@conv1_1..loss", ";", ";;;", "layer;",
        "layer+", "layer+nosuch", "layer+gist+gist", "layer+dpr:fp4", "layer+dpr:fp16+dpr:bf16",
        "layer+zfp", "layer+zfp:rate=0", "layer+zfp:rate=-1", "layer+zfp:rate=abc", "layer+zfp:acc=-1",
        "layer+zfp:nosuch=1", "layer+zfp:rate=8+dpr:fp16", "layer+migrate:nosuch", "layer+migrate:grads:grads",
        "layer+migrate+migrate", "layer bn=nosuch", "layer bn=", "layer bn=train bn=frozen", "2ps:2 bn=per-band bn=train",
        "layer\tbn=train", "x" * 5000, "x" * 9000,
        "offload(relu1_1)@conv1_1..loss", "offload(conv1_1:99)@conv1_1..loss", "offload(conv1_1:0:99)@conv1_1..loss",
        "offload(conv1_1, conv1_1)@conv1_1..loss", "offload(conv1_1..pool1, pool1)@conv1_1..loss", "offload(conv3_1)@conv1_1..pool1",
        "offload(conv1_1:x)@conv1_1..loss", "offload(conv1_1:-1)@conv1_1..loss", "offload(conv1_1:0:0)@conv1_1..loss",
        "offload(conv1_1:1:2:3)@conv1_1..loss", "offload(pool1..conv1_1)@conv1_1..loss", "offload(,)@conv1_1..loss",
        "offload( )@conv1_1..loss", "offload(conv1_1..)@conv1_1..loss", "offload(nosuch:1:1)@conv1_1..loss", "2ps:2,,layer", ",layer", "layer,", "layer+gist:nosuch", "layer+sparse", "rows(2ps,2)@conv1_1..pool1+",
    ]
    return [("plan", "plan '%s'" % (p if len(p) < 40 else p[:37] + "..."), ["sim", "--net", "vgg-small", "--plan", p, "-o", "{o}"], None, None)
            for p in bad]


def spec_cases():
    out = []
    keyvals = {
        "nets": ["", ",", "nosuch", "vgg-small,", ",vgg-small", "vgg-small,,resnet-small", "../../etc/passwd"],
        "image": ["0", "-1", "abc", "32x", "x32", "32x0", "32x-4", "16..32x8", "32x32x2", "1..", "..5", "5..1", "1..9999999", "32..64*1", "32..64*0", "32..64*-2",
                  "99999999999", "1", "native,32"],
        "batch": ["0", "-1", "abc", "1..100000", "2..1*2", "1.5", "", "1,,2"],
        "optimizer": ["nosuch", "sgd,sgd,adam", "", "adam,", "SGD"],
        "plans": ["", "nosuch", "2ps:0", "layer,,layer", "rows(2ps,2)@conv1_1..", "2ps:1..99999"],
        "run": ["nosuch", "", "sim,train"],
        "measure": ["-1", "abc", "99999999", "0x5"],
        "seed": ["-1", "abc", "99999999999999999999999", "1.5"],
        "search": ["nosuch", "", "batch,image"],
        "budgets": ["abc", "-1GiB", "12XB", "1e400GiB", ""],
        "timeline": ["maybe", "1", ""],
        "bn": ["nosuch", ""],
        "device": ["nosuch", ""],
        "figures": ["nosuch", "../../x", "a b"],
        "calibrate": ["{tmp}/nosuch.h5", "x" * 300],
        "profile": ["{tmp}/nosuch.h5", "x" * 300],
        "reproduce": ["maybe"],
    }
    for key, vals in keyvals.items():
        for v in vals:
            lines = [l for l in SPEC.splitlines() if not l.startswith(key + " ")]
            text = "\n".join(lines) + "\n%s = %s\n" % (key, v)
            out.append(("%s = %s" % (key, v if len(v) < 30 else v[:27] + "..."), text))
    whole = [
        ("empty spec", ""),
        ("no nets line", "\n".join(l for l in SPEC.splitlines() if not l.startswith("nets"))),
        ("no plans line", "\n".join(l for l in SPEC.splitlines() if not l.startswith("plans"))),
        ("unknown key", SPEC + "colour = blue\n"),
        ("key twice", SPEC + "batch = 4\n"),
        ("line without =", SPEC + "just words\n"),
        ("= without key", SPEC + "= 4\n"),
        ("binary junk", "\x00\xff\xfe\x01"),
        ("a 100 kB line", SPEC + "name = " + "x" * 100000 + "\n"),
        ("search without budgets", SPEC + "search = batch\n"),
        ("budgets without search", SPEC + "budgets = 1GiB\n"),
        ("search with measure", SPEC + "search = batch\nbudgets = 1GiB\nmeasure = 2\n"),
        ("validate with search", SPEC + "run = validate\nsearch = batch\nbudgets = 1GiB\n"),
        ("validate with timeline", SPEC + "run = validate\ntimeline = on\n"),
        ("train on another device", SPEC + "run = train\ndevice = h100\n"),
        ("train with measure off", SPEC + "run = train\nmeasure = off\n"),
        ("astronomically many runs", SPEC.replace("batch = 2", "batch = 1..1024").replace("plans = layer, 2ps:2", "plans = 2ps:1..4096")),
        ("a plan no net takes", SPEC.replace("plans = layer, 2ps:2", "plans = 2ps:1000")),
        ("a plan for layers the net lacks", SPEC.replace("plans = layer, 2ps:2", "plans = rows(2ps,2)@conv1..layer1.0.relu1")),
    ]
    cases = [("spec", label, ["sweep", "{file}", "-o", "{o}"], text, None) for label, text in out + whole]
    cases.append(("spec", "spec that does not exist", ["sweep", "{tmp}/nosuch.spec", "-o", "{o}"], None, "nosuch.spec"))
    cases.append(("spec", "spec that is a directory", ["sweep", "{tmp}", "-o", "{o}"], None, None))
    return cases


def option_cases():
    out = []
    for cmd in ("sim", "plan", "train", "validate"):
        base = {"sim": ["--net", "vgg-small"], "plan": ["--net", "vgg-small", "--budget", "1GiB"],
                "train": ["--net", "vgg-small", "--iters", "1"], "validate": ["--net", "vgg-small", "--plan", "layer"]}[cmd]
        for opt in ("--batch", "--image"):
            for v in ["0", "-1", "abc", "99999999999", "1.5", "1e9"] + (["64x", "x64", "0x64", "64x0", "64x32x2", "64X32", "64x99999999"] if opt == "--image" else []):
                out.append((cmd, "%s %s %s" % (cmd, opt, v), [cmd] + base + [opt, v, "-o", "{o}"] if cmd != "plan" else [cmd] + base + [opt, v]))
        out.append((cmd, "%s unknown option" % cmd, [cmd] + base + ["--nosuch"]))
        out.append((cmd, "%s option without value" % cmd, [cmd] + base + ["--batch"]))
        out.append((cmd, "%s --optimizer nosuch" % cmd, [cmd] + base + ["--optimizer", "nosuch"]))
        out.append((cmd, "%s --net nosuch" % cmd, [cmd, "--net", "nosuch"] + base[2:]))
        out.append((cmd, "%s --net a directory" % cmd, [cmd, "--net", "{tmp}"] + base[2:]))
        out.append((cmd, "%s --bn nosuch" % cmd, [cmd] + base + ["--bn", "nosuch"]))
    out += [
        ("train", "train --iters 0", ["train", "--net", "vgg-small", "--iters", "0", "-o", "{o}"]),
        ("train", "train --iters huge", ["train", "--net", "vgg-small", "--iters", "99999999999", "-o", "{o}"]),
        ("train", "train --seed -1", ["train", "--net", "vgg-small", "--seed", "-1", "-o", "{o}"]),
        ("train", "train --seed past 2^63", ["train", "--net", "vgg-small", "--seed", "99999999999999999999", "-o", "{o}"]),
        ("train", "train --lr abc", ["train", "--net", "vgg-small", "--lr", "abc", "-o", "{o}"]),
        ("train", "train --lr -1", ["train", "--net", "vgg-small", "--lr", "-1", "-o", "{o}"]),
        ("train", "train --backend nosuch", ["train", "--net", "vgg-small", "--backend", "nosuch", "-o", "{o}"]),
        ("train", "train --image 65536", ["train", "--net", "vgg-small", "--image", "65536", "--iters", "1", "-o", "{o}"]),
        ("train", "train --host-budget abc", ["train", "--net", "vgg-small", "--host-budget", "abc", "-o", "{o}"]),
        ("train", "train too large for this machine", ["train", "--net", "vgg-small", "--image", "16384", "--batch", "256", "-o", "{o}"]),
        ("plan", "plan --budget abc", ["plan", "--net", "vgg-small", "--budget", "abc"]),
        ("plan", "plan --budget -1GiB", ["plan", "--net", "vgg-small", "--budget", "-1GiB"]),
        ("plan", "plan --budget 1 byte", ["plan", "--net", "vgg-small", "--budget", "1"]),
        ("plan", "plan --budget 12XB", ["plan", "--net", "vgg-small", "--budget", "12XB"]),
        ("plan", "plan without --budget", ["plan", "--net", "vgg-small"]),
        ("plan", "plan --space nosuch", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--space", "nosuch"]),
        ("plan", "plan --max-image with bands no image admits", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--max-image", "--plan", "2ps:4096"]),
        ("plan", "plan --max-batch --plan nosuch", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--max-batch", "--plan", "nosuch"]),
        ("plan", "plan --max-batch and --max-image", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--max-batch", "--max-image"]),
        ("plan", "plan --offload-select --window 0", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--window", "0"]),
        ("plan", "plan --offload-select --window 9", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--window", "9"]),
        ("plan", "plan --offload-select --time-limit 0", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--time-limit", "0"]),
        ("plan", "plan --offload-select --time-limit abc", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--time-limit", "abc"]),
        ("plan", "plan --offload-select --time-limit nan", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--time-limit", "nan"]),
        ("plan", "plan --window without --offload-select", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--window", "2"]),
        ("plan", "plan --offload-select --max-batch", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--max-batch"]),
        ("plan", "plan --offload-select --pareto", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--pareto", "{o}"]),
        ("plan", "plan --offload-select --device nosuch", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--offload-select", "--device", "nosuch"]),
        ("sim", "sim --device nosuch", ["sim", "--net", "vgg-small", "--device", "nosuch"]),
        ("sim", "sim --profile missing", ["sim", "--net", "vgg-small", "--profile", "{tmp}/nosuch.h5"]),
        ("sim", "sim --calibrate missing", ["sim", "--net", "vgg-small", "--calibrate", "{tmp}/nosuch.h5"]),
        ("sim", "sim more bands than rows", ["sim", "--net", "vgg16", "--plan", "2ps:100"]),
        ("sweep", "sweep --shard 0/3", ["sweep", "{spec}", "--shard", "0/3", "-o", "{o}"]),
        ("sweep", "sweep --shard 4/3", ["sweep", "{spec}", "--shard", "4/3", "-o", "{o}"]),
        ("sweep", "sweep --shard x", ["sweep", "{spec}", "--shard", "x", "-o", "{o}"]),
        ("sweep", "sweep two specs", ["sweep", "{spec}", "{spec}", "-o", "{o}"]),
        ("sweep", "sweep without a spec", ["sweep", "-o", "{o}"]),
        ("merge", "merge without parts", ["merge", "{o}"]),
        ("merge", "merge a missing part", ["merge", "{o}", "{tmp}/nosuch.h5"]),
        ("export", "export without a file", ["export"]),
        ("export", "export two files", ["export", "{tmp}/a.h5", "{tmp}/b.h5"]),
        ("export", "export --force without -o", ["export", "{tmp}/a.h5", "--force"]),
        ("top", "unknown command", ["nosuch"]),
        ("top", "no command", []),
        ("calibrate", "calibrate without -o", ["calibrate", "--net", "vgg-small"]),
        ("calibrate", "calibrate --backend nosuch", ["calibrate", "--net", "vgg-small", "--backend", "nosuch", "-o", "{o}"]),
        ("reproduce", "reproduce unknown argument", ["reproduce", "--nosuch"]),
        ("demo", "demo with an argument", ["demo", "now"]),
        ("top", "--threads 0", ["train", "--net", "vgg-small", "--threads", "0", "-o", "{o}"]),
        ("top", "--threads abc", ["validate", "--net", "vgg-small", "--threads", "abc", "-o", "{o}"]),
        ("top", "--threads past 4096", ["sweep", "{spec}", "--threads", "99999999999", "-o", "{o}"]),
        ("top", "--threads without a value", ["train", "--net", "vgg-small", "-o", "{o}", "--threads"]),
    ]
    return [("option", label, args, None, None) for _, label, args in out]


def h5_cases():
    """(label, command, how to make {file}: a function of the path, using h5py)."""
    import h5py
    import numpy as np

    def result(f):
        f.attrs["schema_version"] = np.int32(2)
        f.create_dataset("categories", data=np.array([b"weights"], dtype=h5py.string_dtype()))
        f.create_group("runs")

    def make(fill):
        def w(path):
            with h5py.File(path, "w") as f:
                fill(f)
        return w

    def raw(data):
        def w(path):
            with open(path, "wb") as fp:
                fp.write(data)
        return w

    def truncated(path):
        with h5py.File(path, "w") as f:
            result(f)
            f["runs"].create_group("00000").attrs["net"] = "x"
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])

    files = [
        ("not HDF5", raw(b"plain text, not HDF5\n")),
        ("empty file", raw(b"")),
        ("truncated HDF5", truncated),
        ("no schema_version", make(lambda f: f.create_group("runs"))),
        ("schema_version a string", make(lambda f: f.attrs.__setitem__("schema_version", "2"))),
        ("schema_version 99", make(lambda f: f.attrs.__setitem__("schema_version", np.int32(99)))),
        ("schema_version -1", make(lambda f: f.attrs.__setitem__("schema_version", np.int32(-1)))),
        ("runs a dataset", make(lambda f: (f.attrs.__setitem__("schema_version", np.int32(2)), f.create_dataset("runs", data=[1])))),
        ("categories of integers", make(lambda f: (f.attrs.__setitem__("schema_version", np.int32(2)),
                                                   f.create_dataset("categories", data=[1, 2]), f.create_group("runs")))),
        ("categories 2-d", make(lambda f: (f.attrs.__setitem__("schema_version", np.int32(2)),
                                           f.create_dataset("categories", data=np.array([[b"a"]], dtype=h5py.string_dtype())),
                                           f.create_group("runs")))),
        ("categories declaring 2^40 elements", make(lambda f: (f.attrs.__setitem__("schema_version", np.int32(2)),
                                                               f.create_dataset("categories", shape=(2**40,), dtype=h5py.string_dtype(),
                                                                                chunks=(1024,)), f.create_group("runs")))),
        ("a run without attributes", make(lambda f: (result(f), f["runs"].create_group("00000")))),
        ("a run whose net is a number", make(lambda f: (result(f), f["runs"].create_group("00000").attrs.__setitem__("net", 3)))),
        ("a run that is a dataset", make(lambda f: (result(f), f["runs"].create_dataset("00000", data=[1])))),
        ("a weights file with no params", make(lambda f: f.create_group("nothing"))),
        ("weights of rank 9", make(lambda f: f.create_dataset("params/conv1_1/weight", data=np.zeros([1] * 9, np.float32)))),
        ("weights of the wrong shape", make(lambda f: f.create_dataset("params/conv1_1/weight", data=np.zeros((2, 2), np.float32)))),
        ("weights of integers", make(lambda f: f.create_dataset("params/conv1_1/weight", data=np.zeros((8, 3, 3, 3), np.int64)))),
        ("weights declaring 2^40 values", make(lambda f: f.create_dataset("params/conv1_1/weight", shape=(2**40,), dtype=np.float32,
                                                                          chunks=(1024,)))),
        ("a profile without samples", make(lambda f: (f.attrs.__setitem__("kind", "profile"), f.attrs.__setitem__("backend", "cpu")))),
        ("a profile of the wrong types", make(lambda f: (f.attrs.__setitem__("kind", "profile"), f.attrs.__setitem__("backend", "cpu"),
                                                         f.create_dataset("profile/samples", data=np.zeros(3, dtype=[("key", "i4"), ("us", "f8")]))))),
    ]
    out = []
    for label, fill in files:
        out.append(("h5", "export: " + label, ["export", "{file}"], fill, None))
        out.append(("h5", "export -o: " + label, ["export", "{file}", "-o", "{tmp}/exported"], fill, None))
        out.append(("h5", "--profile: " + label, ["sim", "--net", "vgg-small", "--profile", "{file}"], fill, None))
        out.append(("h5", "--calibrate: " + label, ["sim", "--net", "vgg-small", "--plan", "layer+gist", "--calibrate", "{file}"], fill, None))
        out.append(("h5", "--init-weights: " + label, ["train", "--net", "vgg-small", "--iters", "1", "--init-weights", "{file}", "-o", "{o}"],
                    fill, None))
        out.append(("h5", "merge: " + label, ["merge", "{o}", "{file}"], fill, None))
    return out


BASE = {}  # real files made once per corpus run (main): the numbers below are planted in copies of them


def value_cases():
    """Numbers no reader may trust: infinities, NaNs, negatives and huge values planted in real files
    (a device profile, a calibration, weights), parts of a sweep missing what a run needs, and sizes
    and counts past what any machine has or with spaces inside."""
    import shutil
    import h5py
    import numpy as np

    def planted(base, edit):
        def w(path):
            shutil.copy(BASE[base], path)
            with h5py.File(path, "r+") as f:
                edit(f)
        return w

    def table(name, field, value, row=0):
        def edit(f):
            t = f[name][()]
            t[field][row] = value
            f[name][...] = t
        return edit

    def weight(value):
        def edit(f):
            w = f["params/conv1_1/weight"][()]
            w.flat[5] = value
            f["params/conv1_1/weight"][...] = w
        return edit

    def encoded(value):
        def edit(f):
            for run in f["runs"].values():
                if "measured/encoded" in run:
                    table_edit = run["measured/encoded"][()]
                    table_edit["factor_measured"][0] = value
                    run["measured/encoded"][...] = table_edit
        return edit

    def drop(what):
        def edit(f):
            run = f["runs"][sorted(f["runs"])[0]]
            if what.startswith("@"):
                del run.attrs[what[1:]]
            else:
                del run[what]
        return edit

    out = []
    for v in (np.inf, -np.inf, np.nan, -5.0, 1e300):
        out.append(("value", "profile: a sample's time %g" % v, ["plan", "--net", "vgg-small", "--budget", "1GiB", "--profile", "{file}"],
                    planted("profile", table("profile/samples", "us", v)), "not a finite number"))
        out.append(("value", "profile: a sample's size %g" % v, ["sim", "--net", "vgg-small", "--profile", "{file}"],
                    planted("profile", table("profile/samples", "x", v)), "not a finite number"))
        out.append(("value", "profile: a check's measured time %g" % v, ["sim", "--net", "vgg-small", "--profile", "{file}"],
                    planted("profile", table("profile/checks", "measured_us", v)), "not a finite number"))
        out.append(("value", "calibration: a measured factor %g" % v, ["sim", "--net", "vgg-small", "--plan", "layer+gist", "--calibrate", "{file}"],
                    planted("calib", encoded(v)), "not a finite number"))
        if not (v == -5.0 or v == 1e300):
            out.append(("value", "weights: a weight %g" % v, ["train", "--net", "vgg-small", "--iters", "1", "--init-weights", "{file}"],
                        planted("weights", weight(v)), "finite"))
    for what in ("prediction", "prediction/replay", "layers", "plan_segments", "@plan", "@batch"):
        out.append(("value", "merge: a part's run without %s" % what.lstrip("@"), ["merge", "{o}", "{file}", BASE_PATH("part2")],
                    planted("part1", drop(what)), "not a complete run"))
    for opt, v in (("--budget", "9e18"), ("--budget", "2EiB"), ("--budget", " 8GiB"), ("--budget", "8 GiB"), ("--batch", " 8"),
                   ("--batch", "8 "), ("--iters", "\t2")):
        args = ["plan", "--net", "vgg-small", opt, v] + (["--budget", "1GiB"] if opt != "--budget" else [])
        out.append(("value", "%s '%s'" % (opt, v), args, None, None))
    for p in ("layer  bn=frozen", "2ps: 4", "ckpt :3", "layer\tbn=frozen", "rows(2ps,4)@c1..r1;  layer@p1..l"):
        out.append(("value", "--plan '%s'" % p, ["sim", "--net", "vgg-small", "--plan", p], None, "column"))
    return out


def BASE_PATH(name):
    return "{base_%s}" % name


def image_cases():
    def ppm(header, data=b""):
        return header + data

    imgs = [
        ("bad magic", b"P7\n4 4\n255\n" + bytes(48)),
        ("PPM 100000x100000", b"P6\n100000 100000\n255\n" + bytes(48)),
        ("PPM zero width", b"P6\n0 4\n255\n"),
        ("PPM negative size", b"P6\n-4 4\n255\n" + bytes(48)),
        ("PPM maxval 0", b"P6\n4 4\n0\n" + bytes(48)),
        ("PPM maxval 70000", b"P6\n4 4\n70000\n" + bytes(96)),
        ("PPM truncated pixels", b"P6\n32 32\n255\n" + bytes(100)),
        ("PPM header only", b"P6\n"),
        ("PPM text junk", b"P6\nfour four\n255\n"),
        ("empty image file", b""),
        ("PNG signature only", b"\x89PNG\r\n\x1a\n"),
        ("PNG with junk chunks", b"\x89PNG\r\n\x1a\n" + bytes(64)),
    ]
    out = []
    for label, data in imgs:
        out.append(("image", "--data: " + label, ["train", "--net", "vgg-small", "--iters", "1", "--data", "{imgdir}", "-o", "{o}"], data, None))
    out += [
        ("image", "--data missing", ["train", "--net", "vgg-small", "--iters", "1", "--data", "{tmp}/nosuch", "-o", "{o}"], None, None),
        ("image", "--data a file", ["train", "--net", "vgg-small", "--iters", "1", "--data", "{spec}", "-o", "{o}"], None, None),
        ("image", "--data with empty classes", ["train", "--net", "vgg-small", "--iters", "1", "--data", "{emptydir}", "-o", "{o}"], None, None),
        # a class an image cannot label a per-pixel loss's places
        ("image", "--data under a per-pixel loss", ["train", "--net", "unet-small", "--iters", "1", "--data", "{emptydir}", "-o", "{o}"],
         None, "per pixel"),
    ]
    return out


def output_cases():
    sim = ["sim", "--net", "vgg-small", "--plan", "layer"]
    return [
        ("output", "-o in a missing directory", sim + ["-o", "{tmp}/nodir/x.h5"], None, None),
        ("output", "-o a directory", sim + ["-o", "{tmp}"], None, None),
        ("output", "-o an existing file", sim + ["-o", "{existing}"], None, "exists"),
        ("output", "sweep -o an existing file", ["sweep", "{spec}", "-o", "{existing}"], None, "exists"),
        ("output", "train -o an existing file", ["train", "--net", "vgg-small", "--iters", "1", "-o", "{existing}"], None, "exists"),
        ("output", "validate -o an existing file", ["validate", "--net", "vgg-small", "--plan", "layer", "-o", "{existing}"], None, "exists"),
        ("output", "train --dump in a missing directory", ["train", "--net", "vgg-small", "--iters", "1", "-o", "{o}", "--dump", "{tmp}/nodir/d.h5"], None, None),
        ("output", "train -o and --dump the same file", ["train", "--net", "vgg-small", "--iters", "1", "-o", "{o}", "--dump", "{o}"], None, None),
        ("output", "plan --pareto an existing file", ["plan", "--net", "vgg-small", "--budget", "1GiB", "--pareto", "{existing}"], None, "exists"),
        ("output", "calibrate -o an existing file", ["calibrate", "--net", "vgg-small", "-o", "{existing}"], None, "exists"),
        ("output", "export -o over existing tables", ["export", "{result}", "-o", "{tabledir}"], None, "exists"),
        ("output", "export -o a file", ["export", "{result}", "-o", "{existing}"], None, None),
        ("output", "merge over an existing file", ["merge", "{existing}", "{result}"], None, None),
        ("output", "-o in a read-only directory", sim + ["-o", "/proc/x.h5"], None, None),
        ("output", "-o empty", sim + ["-o", ""], None, None),
    ]


def all_cases():
    return net_cases() + plan_cases() + spec_cases() + option_cases() + h5_cases() + image_cases() + output_cases() + value_cases()


# Faults where results are written: outputs that are not regular files (made in the case's own
# directory, never under the real /dev), a full file system (a 64 KiB tmpfs, 40 KiB taken, where
# root may mount one), and signals mid-run. (label, target, command with {out}, stderr words)
SIM = ["sim", "--net", "vgg-small", "--plan", "layer,2ps:2,ckpt-sqrt"]
FAULT_CASES = [
    ("--force over a FIFO", "fifo", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("--force over a device node", "chardev", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("--force over a symbolic link", "symlink", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("merge --force over a FIFO", "fifo", ["merge", "{out}", "{part1}", "{part2}", "--force"], "not a regular file"),
    ("train --dump --force over a FIFO", "fifo", ["train", "--net", "vgg-small", "--iters", "1", "--dump", "{out}", "--force"],
     "not a regular file"),
    ("sim -o on a full disk", "fullfs", SIM + ["-o", "{out}"], "No space left"),
    ("train -o on a full disk", "fullfs", ["train", "--net", "vgg-small", "--iters", "1", "-o", "{out}"], "No space left"),
    ("validate -o on a full disk", "fullfs", ["validate", "--net", "vgg-small", "--plan", "layer,2ps:2", "-o", "{out}"], "No space left"),
    ("merge on a full disk", "fullfs", ["merge", "{out}", "{part1}", "{part2}"], "No space left"),
    ("export -o on a full disk", "fullfs", ["export", "{committed}", "-o", "{outdir}"], "No space left"),
    ("sweep -o on a completely full disk", "fulldisk", ["sweep", "{spec}", "-o", "{out}"], "No space left"),
    ("SIGTERM mid-sweep", "signal:15", ["sweep", "{bigspec}", "-o", "{out}"], None),
    ("SIGINT mid-validate", "signal:2", ["validate", "--net", "vgg16", "--image", "64", "--batch", "2",
                                         "--plan", "layer,2ps:2,overl:2", "-o", "{out}"], None),
]

# The importer (tools/torch2net.py) under the same rules: hostile or broken model files, bad names
# and outputs. (label, model file text or None, arguments with {model} and {out}, stderr words)
GOOD_MODEL = """import torch.nn as nn
def f():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
"""
IMPORT_CASES = [
    ("a model file that exits 0", "import sys\nsys.exit(0)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a model file that exits 3", "import sys\nsys.exit(3)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a factory that exits", "import sys\ndef f():\n    sys.exit(0)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a model file that raises", "raise RuntimeError('no\\nway')\n", ["{model}:f", "-o", "{out}"], "does not load"),
    ("a factory that raises", "def f():\n    raise ValueError('bad')\n", ["{model}:f", "-o", "{out}"], "failed"),
    ("a factory returning no module", "def f():\n    return 3\n", ["{model}:f", "-o", "{out}"], "nn.Module"),
    ("a model file with a syntax error", "def f(:\n", ["{model}:f", "-o", "{out}"], "does not load"),
    ("no such factory", GOOD_MODEL, ["{model}:g", "-o", "{out}"], "has no"),
    ("no such model file", None, ["{tmp}/nope.py:f", "-o", "{out}"], "no such file"),
    ("not a torchvision model", None, ["not_a_model", "-o", "{out}"], "not a torchvision model"),
    ("--name with a newline", GOOD_MODEL, ["{model}:f", "--image", "8", "--name", "a\nconv x c=3", "-o", "{out}"], "--name"),
    ("--name with a space", GOOD_MODEL, ["{model}:f", "--image", "8", "--name", "a b", "-o", "{out}"], "--name"),
    ("--channels 0", GOOD_MODEL, ["{model}:f", "--image", "8", "--channels", "0", "-o", "{out}"], "--channels"),
    ("--image 0", GOOD_MODEL, ["{model}:f", "--image", "0", "-o", "{out}"], "--image"),
    ("an unknown option", GOOD_MODEL, ["{model}:f", "--bogus", "-o", "{out}"], "unrecognized"),
    ("-o in a missing directory", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{tmp}/nodir/x.net"], "no directory"),
    ("-o an existing file", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{existing}"], "exists"),
    ("--force over a FIFO", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{fifo}", "--force"], "not a regular file"),
    ("-o a directory", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{tmp}"], "directory"),
]


def run_import(case, tmp, k):
    label, model, args, want = case
    d = os.path.join(tmp, "i%04d" % k)
    os.makedirs(d)
    subs = {"tmp": d, "out": os.path.join(d, "out.net"), "model": os.path.join(d, "model.py"),
            "existing": os.path.join(d, "existing.net"), "fifo": os.path.join(d, "fifo")}
    if model is not None:
        with open(subs["model"], "w") as fp:
            fp.write(model)
    with open(subs["existing"], "w") as fp:
        fp.write("keep me")
    os.mkfifo(subs["fifo"])
    before = set(os.listdir(d))
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [a.format(**subs) if "{" in a else a for a in args]
    try:
        p = subprocess.run(["/usr/bin/python3", os.path.join(src, "tools", "torch2net.py")] + argv, cwd=d, capture_output=True,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    if p.returncode != 2:
        return "exit %d, want 2%s" % (p.returncode, (": " + lines[-1][:100]) if lines else "")
    if len(lines) != 1:
        return "%d stderr lines, want 1: %s" % (len(lines), " | ".join(lines)[:160])
    if want not in lines[0]:
        return "stderr lacks '%s': %s" % (want, lines[0][:120])
    if p.stdout:
        return "wrote %d bytes on stdout" % len(p.stdout)
    left = sorted(set(os.listdir(d)) - before)
    if left:
        return "left %s" % ", ".join(left)
    if open(subs["existing"]).read() != "keep me":
        return "changed an existing file"
    return None


BIG_SPEC = """name = big
nets = resnet50, unet
batch = 8
plans = layer, 2ps:2..8, overl:2..8
"""


def run_fault(lrcnn, case, tmp, k):
    """None when the fault is met cleanly; 'skip: why' when this machine cannot stage it; else what went wrong."""
    import signal
    import stat
    import time
    label, target, args, want = case
    d = os.path.join(tmp, "f%04d" % k)
    os.makedirs(d)
    where = d
    out = os.path.join(d, "out.h5")
    if target == "fifo":
        os.mkfifo(out)
    elif target == "chardev":
        try:
            os.mknod(out, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # the null device's numbers, in our own directory
        except PermissionError:
            return "skip: mknod needs root"
    elif target == "symlink":
        os.symlink(os.path.join(d, "elsewhere.h5"), out)
    elif target in ("fullfs", "fulldisk"):
        where = os.path.join(d, "fs")
        os.makedirs(where)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where], capture_output=True).returncode:
            return "skip: cannot mount a small tmpfs (needs root)"
        out = os.path.join(where, "out.h5")
        with open(os.path.join(where, "fill"), "wb") as fp:
            fp.write(b"\0" * (56 << 10 if target == "fullfs" else 64 << 10))
    before = {f: os.lstat(os.path.join(where, f)) for f in os.listdir(where)}
    subs = {"out": out, "outdir": os.path.join(where, "tables"), "result": os.path.join(tmp, "result.h5"),
            "spec": os.path.join(tmp, "ok.spec"), "bigspec": os.path.join(tmp, "big.spec"),
            "part1": os.path.join(tmp, "part1.h5"), "part2": os.path.join(tmp, "part2.h5"),
            "committed": os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                      "results", "arena.h5")}
    argv = [a.format(**subs) if "{" in a else a for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        if target.startswith("signal:"):
            sig = int(target.split(":")[1])
            p = subprocess.Popen([lrcnn] + argv, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                 restore_signals=True, start_new_session=True)
            t0 = time.time()
            while time.time() - t0 < 30 and not any(".tmp" in f for f in os.listdir(d)) and p.poll() is None:
                time.sleep(0.05)
            if p.poll() is not None:
                return "finished before the signal (exit %d)" % p.returncode
            time.sleep(0.3)
            os.kill(p.pid, sig)
            _, err = p.communicate(timeout=TIMEOUT)
            rc = p.returncode
            if rc != -sig:
                return "exit %s after signal %d, want death by it" % (rc, sig)
            lines = []
        else:
            p = subprocess.run([lrcnn] + argv, cwd=d, capture_output=True, timeout=TIMEOUT, env=env)
            rc, err = p.returncode, p.stderr
            notes = ("warning: load average", "merge: the parts were written from a tree with local changes")  # not errors
            lines = [l for l in err.decode("utf-8", "replace").splitlines() if l.strip() and not l.startswith(notes)]
            if rc != 2:
                return "exit %d, want 2%s" % (rc, (": " + lines[-1][:100]) if lines else "")
            if len(lines) != 1:
                return "%d stderr lines, want 1: %s" % (len(lines), " | ".join(lines)[:160])
            if want and want not in lines[0]:
                return "stderr lacks '%s': %s" % (want, lines[0][:120])
        after = {f: os.lstat(os.path.join(where, f)) for f in os.listdir(where)}
        left = sorted(set(after) - set(before))
        if left:
            return "left %s" % ", ".join(left)
        changed = [f for f in before if (before[f].st_mode, before[f].st_ino, before[f].st_size) !=
                   (after[f].st_mode, after[f].st_ino, after[f].st_size)]
        if changed:
            return "changed %s" % ", ".join(changed)
        return None
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    finally:
        if target in ("fullfs", "fulldisk"):
            subprocess.run(["umount", where], capture_output=True)


# --------------------------------------------------------------------------------------------
# Running

def run_case(lrcnn, case, tmp, k):
    cls, label, args, data, want = case
    d = os.path.join(tmp, "c%04d" % k)
    os.makedirs(d)
    subs = {"tmp": d, "o": os.path.join(d, "out.h5"), "spec": os.path.join(tmp, "ok.spec"), "base_part2": BASE.get("part2", ""),
            "existing": os.path.join(d, "existing.h5"), "result": os.path.join(tmp, "result.h5"),
            "emptydir": os.path.join(d, "empty"), "imgdir": os.path.join(d, "img"), "tabledir": os.path.join(d, "tables")}
    with open(subs["existing"], "wb") as fp:
        fp.write(b"keep me")
    os.makedirs(os.path.join(subs["emptydir"], "cat"))
    os.makedirs(subs["tabledir"])
    open(os.path.join(subs["tabledir"], "runs.tsv"), "w").write("keep me")
    if cls == "image" and data is not None:
        os.makedirs(os.path.join(subs["imgdir"], "cat"))
        with open(os.path.join(subs["imgdir"], "cat", "a.ppm"), "wb") as fp:
            fp.write(data)
    elif callable(data):
        subs["file"] = os.path.join(d, "in.h5")
        data(subs["file"])
    elif data is not None:
        subs["file"] = os.path.join(d, "in.txt")
        with open(subs["file"], "w", encoding="utf-8", errors="surrogateescape") as fp:
            fp.write(data)
    argv = [a.format(**subs) if "{" in a and "}" in a else a for a in args]
    before = set(os.listdir(d))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        p = subprocess.run([lrcnn] + argv, cwd=d, capture_output=True, timeout=TIMEOUT, env=env)
        rc, err = p.returncode, p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    lines = [l for l in err.splitlines() if l.strip()]
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer report: " + next((l for l in lines if "Sanitizer" in l or "runtime error" in l), "")[:100]
    if rc < 0:
        return "killed by signal %d" % -rc
    if rc != 2:
        return "exit %d, want 2%s" % (rc, (": " + lines[-1][:100]) if lines else "")
    if len(lines) != 1:
        return "%d stderr lines, want 1: %s" % (len(lines), " | ".join(lines)[:160])
    if want and want not in lines[0]:
        return "stderr lacks '%s': %s" % (want, lines[0][:100])
    after = set(os.listdir(d))
    made = sorted(f for f in after - before if f.endswith((".h5", ".tmp")) or ".tmp" in f or f == "exported")
    if made:
        return "wrote %s" % ", ".join(made)
    if open(subs["existing"], "rb").read() != b"keep me" or open(os.path.join(subs["tabledir"], "runs.tsv")).read() != "keep me":
        return "changed an existing file"
    return None


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    lrcnn, opts = os.path.abspath(argv[1]), argv[2:]
    cases = all_cases()
    if "--class" in opts:
        want = opts[opts.index("--class") + 1]
        cases = [c for c in cases if c[0] == want]
    only = opts[opts.index("--class") + 1] if "--class" in opts else None
    faults = FAULT_CASES if only in (None, "fault") else []
    imports = IMPORT_CASES if only in (None, "import") else []
    if "--list" in opts:
        for c in cases:
            print("%-7s %s" % (c[0], c[1]))
        for c in faults:
            print("%-7s %s" % ("fault", c[0]))
        for c in imports:
            print("%-7s %s" % ("import", c[0]))
        print("%d cases" % (len(cases) + len(faults) + len(imports)))
        return 0
    tally = {}
    with tempfile.TemporaryDirectory(prefix="lrcnn-bad-") as tmp:
        with open(os.path.join(tmp, "ok.spec"), "w") as fp:
            fp.write(SPEC)
        subprocess.run([lrcnn, "sim", "--net", "vgg-small", "--plan", "layer", "-o", os.path.join(tmp, "result.h5")],
                       capture_output=True, check=True)
        with open(os.path.join(tmp, "big.spec"), "w") as fp:
            fp.write(BIG_SPEC)
        for k in (1, 2):  # a sweep in two shards, for merge
            subprocess.run([lrcnn, "sweep", os.path.join(tmp, "ok.spec"), "--shard", "%d/2" % k, "--quiet", "-o",
                            os.path.join(tmp, "part%d.h5" % k)], capture_output=True, check=True)
            BASE["part%d" % k] = os.path.join(tmp, "part%d.h5" % k)
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        BASE["profile"] = os.path.join(src, "results", "profile_cpu.h5")
        BASE["calib"], BASE["weights"] = os.path.join(tmp, "calib.h5"), os.path.join(tmp, "weights.h5")
        subprocess.run([lrcnn, "validate", "--net", "vgg-small", "--batch", "2", "--plan", "layer+gist", "-o", BASE["calib"]],
                       capture_output=True, check=True)
        subprocess.run([lrcnn, "train", "--net", "vgg-small", "--iters", "1", "--dump", BASE["weights"]], capture_output=True, check=True)
        for k, case in enumerate(cases):
            why = run_case(lrcnn, case, tmp, k)
            t = tally.setdefault(case[0], [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL %-7s %s: %s" % (case[0], case[1], why), flush=True)
        for k, case in enumerate(faults):
            why = run_fault(lrcnn, case, tmp, k)
            if why and why.startswith("skip:"):
                print("skip fault   %s (%s)" % (case[0], why[6:]), flush=True)
                continue
            t = tally.setdefault("fault", [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL fault   %s: %s" % (case[0], why), flush=True)
        for k, case in enumerate(imports):
            why = run_import(case, tmp, k)
            t = tally.setdefault("import", [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL import  %s: %s" % (case[0], why), flush=True)
    digest = hashlib.sha1("\n".join(["%s|%s|%s" % (c[0], c[1], c[2]) for c in cases] +
                                    ["fault|%s|%s" % (c[0], c[2]) for c in faults] +
                                    ["import|%s|%s" % (c[0], c[2]) for c in imports]).encode()).hexdigest()[:12]
    print("\n%-8s %7s %14s %9s" % ("class", "cases", "clean exit 2", "findings"))
    total = [0, 0]
    for cls, (n, ok) in tally.items():
        print("%-8s %7d %14d %9d" % (cls, n, ok, n - ok))
        total[0] += n
        total[1] += ok
    print("%-8s %7d %14d %9d   (corpus %s)" % ("all", total[0], total[1], total[0] - total[1], digest))
    return 0 if total[0] == total[1] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
