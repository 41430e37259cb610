"""The bad-input corpus's cases of malformed inputs: net files, plans, specs, options, HDF5 files,
images and outputs (tests/bad/run.py runs them). Each case is (class, label, lrcnn arguments with
{placeholders}, the input file's contents or a function that writes it, words the error must
hold)."""
TIMEOUT = 60

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
        ("slice past the input's channels", NET.replace("relu r1", "slice r1 start=4 c=5"), "past the input"),
        ("slice of no channels", NET.replace("relu r1", "slice r1 c=0"), "c"),
        ("slice without c", NET.replace("relu r1", "slice r1 start=2"), "c"),
        ("slice start=-1", NET.replace("relu r1", "slice r1 start=-1 c=2"), "start"),
        ("slice of two inputs", NET.replace("add a3 in=r2,c3", "slice a3 in=r2,c3 c=2"), None),
        ("shuffle groups not dividing the channels", NET.replace("relu r1", "shuffle r1 groups=3"), "groups=3"),
        ("shuffle groups=0", NET.replace("relu r1", "shuffle r1 groups=0"), "groups"),
        ("shuffle without groups", NET.replace("relu r1", "shuffle r1"), "groups"),
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
        "layer+migrate+migrate", "layer+torch+torch2", "torch+torch", "torch2+torch2", "layer bn=nosuch", "layer bn=",
        "layer bn=train bn=frozen", "2ps:2 bn=per-band bn=train", "2ps:2 bn=train-offload:0", "2ps:2 bn=train-offload:",
        "2ps:2 bn=train-offload:x", "2ps:2 bn=train-offload:-1", "2ps:2 bn=train-offload:1.5", "2ps:2 bn=train:2",
        "2ps:2 bn=frozen:1", "2ps:2 bn=train-offload:99999999999", "2ps:2 bn=train-rebuild:0", "2ps:2 bn=train-rebuild:x",
        "2ps:2 bn=train-rebuild:", "2ps:2 bn=train-recompute:2", "2ps:2 bn=train-rebuild/1", "2ps:2 bn=train-rebuild/",
        "2ps:2 bn=train-rebuild/x", "2ps:2 bn=train-offload/2", "2ps:2 bn=train-rebuild/2:3", "2ps:2 bn=train/2",
        "2ps:2 bn=train:", "2ps:2 bn=train:x", "2ps:2 bn=train:okx", "2ps:2 bn=train:OK", "2ps:2 bn=train:or/2",
        "2ps:2 bn=train-offload:or", "2ps:2 bn=train:" + "o" * 129, "2ps:2 bn=frozen:or",
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
        "bn": ["nosuch", "", "train-rebuild:16/2, nosuch", "train-rebuild:" + "1" * 70],
        "device": ["nosuch", "", "h100-pcie4-and-then-some"],
        "name": ["x" * 70],
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
    for cmd in ("sim", "plan", "train", "validate", "lower"):
        base = {"sim": ["--net", "vgg-small"], "plan": ["--net", "vgg-small", "--budget", "1GiB"],
                "train": ["--net", "vgg-small", "--iters", "1"], "validate": ["--net", "vgg-small", "--plan", "layer"],
                "lower": ["--net", "vgg-small", "--plan", "2ps:2"]}[cmd]
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
        ("pipe", "pipe without --devices", ["pipe", "--net", "vgg-small", "--micro-batches", "2"]),
        ("pipe", "pipe --devices 0", ["pipe", "--net", "vgg-small", "--devices", "0", "--micro-batches", "2"]),
        ("pipe", "pipe --micro-batches abc", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "abc"]),
        ("pipe", "pipe --chunks without interleaved", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "2", "--chunks", "2"]),
        ("pipe", "pipe --plan nosuch", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "2", "--batch", "4", "--plan", "nosuch"]),
        ("pipe", "pipe --net nosuch", ["pipe", "--net", "nosuch", "--devices", "2", "--micro-batches", "2"]),
        ("pipe", "pipe --candidates with bn=train-offload:K", ["pipe", "--net", "resnet-small", "--devices", "2", "--micro-batches", "2",
                                                             "--batch", "4", "--budget", "1GiB", "--candidates", "layer,2ps:2",
                                                             "--bn", "train-offload:1"]),
        ("pipe", "pipe --candidates with bn=train-rebuild:K", ["pipe", "--net", "resnet-small", "--devices", "2", "--micro-batches", "2",
                                                             "--batch", "4", "--budget", "1GiB", "--candidates", "layer,2ps:2",
                                                             "--bn", "train-rebuild:2"]),
        ("pipe", "pipe --candidates with bn=train:LETTERS", ["pipe", "--net", "resnet-small", "--devices", "2", "--micro-batches", "2",
                                                             "--batch", "4", "--budget", "1GiB", "--candidates", "layer,2ps:2",
                                                             "--bn", "train:ro"]),
        ("pipe", "pipe -o", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "2", "-o", "{o}"]),
        ("pipe", "pipe --run on a GPU profile", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "2", "--batch", "4", "--run", "--device", "h100"]),
        ("pipe", "plan --pipeline with more devices than clean cuts", ["plan", "--pipeline", "40", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small", "--budget", "1GiB"]),
        ("pipe", "plan --pipeline --micro-batches 0", ["plan", "--pipeline", "2", "--micro-batches", "0", "--net", "vgg-small", "--budget", "1GiB"]),
        ("pipe", "plan --pipeline under a budget no split meets", ["plan", "--pipeline", "2", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small", "--budget", "1KiB"]),
        ("pipe", "plan --pipeline without --budget", ["plan", "--pipeline", "2", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small"]),
        ("pipe", "plan --pipeline --solver nosuch", ["plan", "--pipeline", "2", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small", "--budget", "1GiB", "--solver", "nosuch"]),
        ("pipe", "plan --pipeline --candidates with an unknown plan", ["plan", "--pipeline", "2", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small", "--budget", "1GiB", "--candidates", "layer,nosuch"]),
        ("pipe", "plan --pipeline interleaved", ["plan", "--pipeline", "2", "--micro-batches", "2", "--batch", "4", "--net", "vgg-small", "--budget", "1GiB", "--schedule", "interleaved", "--chunks", "2"]),
        ("pipe", "pipe --run of a plan that migrates", ["pipe", "--net", "vgg-small", "--devices", "2", "--micro-batches", "2", "--batch", "4", "--run", "--plan", "layer+migrate"]),
        ("lower", "lower without --plan", ["lower", "--net", "vgg-small", "-o", "{o}"]),
        ("lower", "lower --iters", ["lower", "--net", "vgg-small", "--plan", "layer", "--iters", "2", "-o", "{o}"]),
        ("lower", "lower ckpt-opt:B nothing fits", ["lower", "--net", "vgg-small", "--plan", "ckpt-opt:1KiB", "-o", "{o}"]),
        ("lower", "lower --device unknown", ["lower", "--net", "vgg-small", "--plan", "layer", "--device", "nosuch", "-o", "{o}"]),
        ("lower", "lower --profile", ["lower", "--net", "vgg-small", "--plan", "layer", "--profile", "x.h5", "-o", "{o}"]),
        ("sim", "sim ckpt-opt:B not bytes", ["sim", "--net", "vgg-small", "--plan", "ckpt-opt:1.5", "-o", "{o}"]),
        ("sim", "sim ckpt-opt:2000%", ["sim", "--net", "vgg-small", "--plan", "ckpt-opt:2000%", "-o", "{o}"]),
        ("sim", "sim ckpt-opt: (empty B)", ["sim", "--net", "vgg-small", "--plan", "ckpt-opt:", "-o", "{o}"]),
        ("sim", "sim ckpt-optimal (no such plan)", ["sim", "--net", "vgg-small", "--plan", "ckpt-optimal", "-o", "{o}"]),
        ("sim", "sim ckpt-opt with a bad modifier", ["sim", "--net", "vgg-small", "--plan", "ckpt-opt+nosuch", "-o", "{o}"]),
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

    def profile_with_algos(key):
        """A device profile with one sample and one stored algorithm choice keyed `key`."""
        def fill(f):
            result(f)
            text = h5py.string_dtype()
            f.attrs["kind"], f.attrs["backend"] = "profile", "cuda"
            f.create_dataset("profile/samples", data=np.array(
                [("vgg-small", "layer", "fwd conv", "fwd conv", 4, 0, 64.0, 1e6, 10.0)],
                dtype=[("net", text), ("plan", text), ("key", text), ("class", text), ("batch", "i4"), ("step", "i4"),
                       ("x", "f8"), ("work", "f8"), ("us", "f8")]))
            a = f.create_dataset("profile/algos", data=np.array(
                [(key, 1, 0, 0.5, "layer 'conv1_1', forward")],
                dtype=[("key", text), ("algo", "i4"), ("ws", "i8"), ("ms", "f8"), ("call", text)]))
            a.attrs["format"], a.attrs["device"] = "cudnn-conv 1", "NVIDIA H200 (compute capability 9.0), cuDNN 9.14.0"
        return make(fill)

    # a stored algorithm choice whose key is not 32 integers: every --profile reader refuses it
    short = profile_with_algos("1 2 3")
    out.append(("h5", "--profile: an algorithm key of three words", ["sim", "--net", "vgg-small", "--profile", "{file}"], short, None))
    out.append(("h5", "train --profile: an algorithm key of three words",
                ["train", "--net", "vgg-small", "--iters", "1", "--profile", "{file}", "-o", "{o}"], short, None))
    return out


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


