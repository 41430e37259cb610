#!/usr/bin/env python3
"""torch_cases.py: the cases tests/torch_ref.py runs — the shipped test nets and torchvision's, and
one small generated net per layer kind (odd sizes, every pooling layer behind a conv so its backward
reaches a parameter gradient), each with its input size, batch, optimizer, plan and BatchNorm mode.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NETS = os.path.join(os.path.dirname(HERE), "nets")

# One small net per layer kind, odd sizes; every pooling layer sits behind a conv so its backward
# reaches a parameter gradient. Each ends with what it needs to reach the loss.
GENERATED = {
    # channel groups: a depthwise-separable block (MobileNet's), then a strided grouped conv
    "conv-groups": """input data c=3 h=13 w=11
conv conv1 c=8 k=3 p=1
relu6 act1
conv dw c=8 k=3 p=1 groups=8 bias=0  # depthwise
relu6 act2
conv pw c=12 k=1                # pointwise
conv g4 c=12 k=3 s=2 p=1 groups=4 # 13x11 -> 7x6, three channels a group
relu r4
gap gap
fc fc c=5
loss loss
""",
    # dropout after a relu, after a strided conv and on the fc's logits, at three rates; stochastic
    # depth (a draw an image) on a residual branch
    "dropout": """input data c=3 h=12 w=10
conv conv1 c=6 k=3 p=1
relu relu1
dropout drop1 p=0.3
conv conv2 c=6 k=3 s=2 p=1      # 12x10 -> 6x5
dropout drop2
conv conv3 c=6 k=3 p=1
dropout depth p=0.5 sample=1    # with the batch of 3, p=0.5 drops some images and keeps others
add res in=depth,drop2
gap gap
fc fc c=5
dropout drop3 p=0.2
loss loss
""",
    # every elementwise activation, in and out of place (relu6 and leakyrelu after a conv run in
    # place; after an add whose input is read twice they cannot)
    "activations": """input data c=3 h=15 w=13
conv conv1 c=6 k=3 p=1
relu6 act1
conv conv2 c=6 k=3 p=1
leakyrelu act2 slope=0.1
conv conv3 c=6 k=3 p=1
sigmoid act3
conv conv4 c=6 k=3 s=2 p=1      # 15x13 -> 8x7
silu act4
conv conv5 c=6 k=3 p=1
gelu act5
conv conv6 c=6 k=1
hardswish act6
add sum in=act6,act6
leakyrelu act7
gap gap
fc fc c=5
loss loss
""",
    "conv-k5s2": """input data c=3 h=17 w=15
conv conv1 c=6 k=5 s=2          # 17x15 -> 7x6, padding 0
relu relu1
gap gap
fc fc c=5
loss loss
""",
    "conv-dil2": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 d=2 p=2      # dilated, 13x11 -> 13x11
relu relu1
conv conv2 c=4 k=3 d=2 p=1      # dilation larger than padding: 13x11 -> 11x9
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "conv-1x1": """input data c=4 h=13 w=11
conv conv1 c=6 k=1 bias=0
relu relu1
conv conv2 c=5 k=1 s=2          # 1x1 stride 2: 13x11 -> 7x6
relu relu2
gap gap
fc fc c=5 bias=0
loss loss
""",
    "maxpool": """input data c=3 h=17 w=15
conv conv1 c=4 k=3 p=1
maxpool pool1 k=3 s=2 p=1       # padding never wins: 17x15 -> 9x8
fc fc c=5                       # over 4x9x8
loss loss
""",
    "avgpool": """input data c=3 h=17 w=15
conv conv1 c=4 k=3 p=1
avgpool pool1 k=3 s=2 p=1       # zero padding counted, divisor 9: 17x15 -> 9x8
fc fc c=5
loss loss
""",
    "bn": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1 bias=0
bn bn1
relu relu1
conv conv2 c=5 k=3 s=2 bias=0   # 13x11 -> 6x5
bn bn2 eps=1e-3 momentum=0.3    # non-default keys must be honoured
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "fc-map": """input data c=3 h=7 w=5
conv conv1 c=4 k=3              # 7x5 -> 5x3
relu relu1
fc fc1 c=8                      # over 4x5x3 = 60 inputs in (C, H, W) order
relu relu2
fc fc2 c=5
loss loss
""",
    "add": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1
relu relu1
conv conv2 c=6 k=3 p=1
add add1 in=conv2,relu1         # shortcut: relu1 has two consumers
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "add-later": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1
relu relu1
add add1 in=conv2,relu1         # conv2 is defined further down (FORMAT.md allows it)
relu relu2
gap gap
fc fc c=5
loss loss
conv conv2 c=6 k=3 p=1 in=relu1
""",
    "many": """input data c=3 h=9 w=8
conv a c=2 k=3 p=1
conv b c=2 k=1 in=data
conv c c=2 k=3 s=1 p=2 d=2 in=data
add sum in=a,b,c,a              # four inputs, one twice: a's gradient twice over
relu r in=sum
concat dense in=data,a,r,b,c,r  # six inputs: the image, one twice (DenseNet's concat)
conv d c=3 k=3 s=2 in=dense
gap g
fc fc c=4
loss loss
""",
    "conv-hw": """input data c=3 h=11 w=13
conv conv1 c=6 k=1x7 p=0x3          # Inception's factorized 7x7: 1x7, then 7x1
conv conv2 c=6 k=7x1 p=3x0
relu relu2
conv conv3 c=4 k=3x5 s=2x1 p=1x2 d=1x2 groups=2 # 11x13 -> 6x13
relu relu3
conv conv4 c=4 k=1 s=1x2            # -> 6x7
gap gap
fc fc c=5
loss loss
""",
    "norms": """input data c=3 h=9 w=7
conv conv1 c=8 k=3 p=1
gnorm gn1 groups=4                  # two channels a group, over the whole 9x7 map
relu relu1
conv conv2 c=6 k=3 s=2 p=1          # -> 5x4
lnorm ln2 eps=1e-6                  # each place over its 6 channels (ConvNeXt's LayerNorm2d)
gelu act2
conv conv3 c=4 k=1
scale ls3                           # ConvNeXt's layer scale
gnorm gn3 groups=1                  # one group: LayerNorm over (C, H, W)
gap gap
fc fc c=5
loss loss
""",
    "bilinear": """input data c=3 h=7 w=5
conv conv1 c=4 k=3 p=1
bilinear up1 scale=3                # 7x5 -> 21x15
conv conv2 c=4 k=3 s=2              # -> 10x7
relu relu2
bilinear up2 align=1                # -> 20x14, corners aligned
conv conv3 c=3 k=3 s=2 p=1          # -> 10x7
bilinear up3 scale=4 align=1        # -> 40x28
conv conv4 c=2 k=1
loss loss pixel=1
""",
    "convt": """input data c=3 h=7 w=6
conv conv1 c=4 k=3 s=2 p=1          # 7x6 -> 4x3
relu relu1
convt up1 c=4 k=2 s=2               # -> 8x6: a U-Net's up-convolution
convt up2 c=6 k=3 s=2 p=1 op=1 groups=2 # -> 16x12
relu relu2
convt up3 c=2 k=3 p=2 d=2 bias=0    # stride 1, dilated: 16x12
loss loss pixel=1
""",
    "gap": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 s=2 p=1      # 13x11 -> 7x6
relu relu1
gap gap                         # mean over 42 positions
fc fc c=5
loss loss
""",
    "upsample": """input data c=3 h=7 w=5
conv conv1 c=4 k=3 p=1
upsample up1 scale=3           # 7x5 -> 21x15
conv conv2 c=4 k=3 s=2         # -> 10x7: a strided window over the copies
relu relu2
upsample up2                   # -> 20x14
fc fc c=5
loss loss
""",
    "concat": """input data c=3 h=9 w=7
conv a c=2 k=3 p=1
conv b c=3 k=1 in=data
concat ab in=a,b               # 2 + 3 channels
concat self in=ab,ab           # a tensor with itself: both halves' gradients to it
conv c c=4 k=3 s=2
concat img in=data,data        # the image itself, twice (no gradient)
conv d c=2 k=3 s=2 in=img
concat cd in=c,d
fc fc c=5
loss loss
""",
    "loss-pixel": """input data c=3 h=6 w=5
conv conv1 c=4 k=3 p=1
relu relu1
conv conv2 c=3 k=3 s=2 p=1     # 3 classes at 3x3 places
loss loss pixel=1
""",
    "se": """input data c=3 h=7 w=6
conv conv1 c=8 k=3 p=1
hardswish act1
gap squeeze                    # squeeze-and-excitation (MobileNetV3's)
conv fc1 c=4 k=1
relu r1
conv fc2 c=8 k=1
hardsigmoid gate
mul excite in=gate,act1        # the scale first, as torchvision writes it
mul sq in=excite,excite        # a product of a tensor with itself
conv conv2 c=3 k=3 s=2
loss loss pixel=1
""",
    "apool-7": """input data c=3 h=7 w=7
conv conv1 c=4 k=3 p=1
relu relu1
apool pool o=3                  # windows [0,3) [2,5) [4,7): overlapping
fc fc c=5
loss loss
""",
    "apool-13x11": """input data c=3 h=13 w=11
conv conv1 c=4 k=3 p=1
relu relu1
apool pool o=3                  # rows [0,5) [4,9) [8,13); cols [0,4) [3,8) [7,11)
fc fc c=5
loss loss
""",
    "loss-map": """input data c=3 h=6 w=5
conv conv1 c=3 k=3 s=2          # 6x5 -> 2x2: 12 logits in (C, H, W) order
loss loss
""",
}


def cases():
    """(name, net file or generated key, image, batch, optimizer, plan, bn)."""
    v, r, k = (os.path.join(NETS, n + ".net") for n in ("vgg-small", "resnet-small", "kernels"))
    c = [("vgg-small/sgd", v, 32, 4, "sgd", "layer", None),
         ("vgg-small/adam", v, 32, 4, "adam", "layer", None),
         ("vgg-small/sgd/ckpt-sqrt", v, 32, 4, "sgd", "ckpt-sqrt", None),
         ("resnet-small/sgd/bn-train", r, 32, 4, "sgd", "layer", "train"),
         ("resnet-small/sgd/bn-frozen", r, 32, 4, "sgd", "layer", "frozen"),
         ("kernels/adam", k, None, 3, "adam", "layer", None),
         ("updown/sgd", os.path.join(NETS, "updown.net"), None, 4, "sgd", "layer", None),
         ("unet-small/adam", os.path.join(NETS, "unet-small.net"), None, 4, "adam", "layer", None),  # per-pixel loss
         ("upconv/sgd", os.path.join(NETS, "upconv.net"), None, 4, "sgd", "layer", None),  # transposed convolutions
         ("bilinear/adam", os.path.join(NETS, "bilinear.net"), None, 4, "adam", "layer", None),
         ("norms/sgd", os.path.join(NETS, "norms.net"), None, 3, "sgd", "layer", None),  # gnorm, lnorm
         # a whole torchvision net made by tools/torch2net.py (depthwise convolutions, relu6,
         # inverted residuals, dropout) with its batch norms frozen: in train mode, untrained and
         # on few values a channel, its fp32 gradients are ill-conditioned — PyTorch's own float32
         # gradient is ~1e-2 from its float64 one (frozen: 5e-7) — so two correct fp32 engines
         # differ by more than any tolerance; train mode is checked on resnet-small above, and
         # MobileNetV2's row plans against `layer` in test_exact
         ("mobilenetv2/adam/bn-frozen", os.path.join(NETS, "mobilenetv2.net"), 128, 4, "adam", "layer", "frozen"),
         # MobileNetV3-Large: squeeze-and-excitation (gap, 1x1 convs, hardsigmoid, mul), hardswish
         ("mobilenetv3/sgd/bn-frozen", os.path.join(NETS, "mobilenetv3.net"), 128, 3, "sgd", "layer", "frozen"),
         # the shipped U-Net (tools/unet.py, 34.5 M parameters): skips concatenated to upsampled
         # maps, a per-pixel loss, at 128x128, batch norm frozen as for the MobileNets: in train mode,
         # untrained, PyTorch's own fp32 gradients are 4.8e-3 from its fp64 ones (measured once, batch
         # 2; ours are 1.4e-3 from its fp32 ones); train mode is checked on unet-small above, and the
         # U-Net's row plans against `layer` in test_exact)
         ("unet/sgd/bn-frozen", os.path.join(NETS, "unet.net"), 128, 2, "sgd", "layer", "frozen"),
         # DenseNet-121: concats of up to 25 inputs
         ("densenet121/adam/bn-frozen", os.path.join(NETS, "densenet121.net"), 64, 3, "adam", "layer", "frozen"),
         # ConvNeXt-T: 7x7 depthwise convolutions, layer norm over the channels, Linears over them (1x1
         # convs), GELU, layer scale, stochastic depth; no batch norm to freeze
         ("convnext-tiny/adam", os.path.join(NETS, "convnext-tiny.net"), 64, 2, "adam", "layer", None),
         # EfficientNet-B0: SiLU, squeeze-and-excitation with sigmoid, stochastic depth (a draw an image)
         ("efficientnetb0/sgd/bn-frozen", os.path.join(NETS, "efficientnetb0.net"), 64, 4, "sgd", "layer", "frozen")]
    for i, g in enumerate(GENERATED):
        opt = "adam" if i % 2 else "sgd"
        if g == "bn":
            c += [("gen-bn/sgd/bn-train", "gen:bn", None, 3, "sgd", "layer", "train"),
                  ("gen-bn/adam/bn-frozen", "gen:bn", None, 3, "adam", "layer", "frozen")]
        else:
            c.append(("gen-%s/%s" % (g, opt), "gen:" + g, None, 3, opt, "layer", None))
    # last, so that every case above keeps its seed: ceil-mode max pooling (windows past the map's end)
    sh = os.path.join(NETS, "shuffle-small.net")  # channel slices and shuffles, batch norm in train mode
    c += [("shuffle-small/sgd/bn-train", sh, None, 4, "sgd", "layer", "train"),
          ("shuffle-small/adam/2ps:3", sh, None, 4, "adam", "2ps:3", "train")]
    sq = os.path.join(NETS, "squeeze-small.net")
    c += [("squeeze-small/sgd", sq, None, 4, "sgd", "layer", None), ("squeeze-small/adam/2ps:3", sq, None, 4, "adam", "2ps:3", None)]
    return c
