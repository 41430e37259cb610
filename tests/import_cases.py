"""PyTorch modules for tests/test_import.py: what tools/torch2net.py must convert (the functional
forms, views, every activation module, grouped and strided windows) and what it must refuse, each
refusal naming the node it cannot represent."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Functional(nn.Module):
    """Functional calls, a method relu, a shortcut, x.view(x.size(0), -1) and an adaptive pool to 2x2."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-3, momentum=0.01)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=4)
        self.down = nn.Conv2d(8, 8, 1, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        y = self.conv2(x).relu()
        x = torch.add(y, self.down(x))
        x = torch.sigmoid(x)
        x = self.pool(x)
        return self.fc(x.view(x.size(0), -1))


class Activations(nn.Module):
    """Every activation module, both pools, dropout, Identity and Flatten."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 6, 5, padding=2), nn.LeakyReLU(0.2), nn.MaxPool2d(3, stride=2, padding=1),
            nn.Conv2d(6, 6, 3, padding=1, groups=6), nn.GELU(), nn.Conv2d(6, 12, 1), nn.SiLU(),
            nn.AvgPool2d(2), nn.Hardswish(), nn.Conv2d(12, 12, 3), nn.ReLU6(inplace=True), nn.Dropout(0.25),
            nn.Identity(), nn.Conv2d(12, 4, 1), nn.Sigmoid(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))

    def forward(self, x):
        return self.body(x)


class UNet(nn.Module):
    """Two levels: skips concatenated to upsampled maps (torch.cat as a list and as a tuple)."""

    def __init__(self):
        super().__init__()
        self.e1, self.e2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 8, 3, padding=1)
        self.pool, self.up = nn.MaxPool2d(2), nn.Upsample(scale_factor=2)
        self.d2, self.d1 = nn.Conv2d(16, 4, 3, padding=1), nn.Conv2d(8, 2, 1)
        self.fc = nn.Linear(2 * 16 * 16, 3)

    def logits(self, x):
        e1 = F.relu(self.e1(x))
        e2 = F.relu(self.e2(self.pool(e1)))
        d2 = F.relu(self.d2(torch.cat([self.up(self.pool(e2)), e2], dim=1)))
        return self.d1(torch.cat((self.up(d2), e1), 1))

    def forward(self, x):
        return self.fc(torch.flatten(self.logits(x), 1))


class Seg(UNet):
    """The U-Net's per-pixel logits (2 classes at 16x16), for --pixel-loss."""

    def __init__(self):
        super().__init__()
        del self.fc

    def forward(self, x):
        return self.logits(x)


class UpConv(nn.Module):
    """A U-Net's decoder by transposed convolutions (2x2 stride 2, and 3x3 stride 2 with output padding,
    grouped), per-pixel logits."""

    def __init__(self):
        super().__init__()
        self.e1, self.e2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.e3 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.up3 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up2 = nn.ConvTranspose2d(16, 4, 2, stride=2, bias=False)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = F.relu(self.e1(x))
        e2 = F.relu(self.e2(e1))
        d2 = torch.cat([F.relu(self.up3(F.relu(self.e3(e2)))), e2], 1)
        return self.head(torch.cat([self.up2(d2), e1], 1))


class Norms(nn.Module):
    """GroupNorm, and torchvision's LayerNorm2d (ConvNeXt's, over the channels at each place)."""

    def __init__(self):
        super().__init__()
        from torchvision.models.convnext import LayerNorm2d
        self.c1, self.gn = nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8)
        self.c2, self.ln = nn.Conv2d(8, 6, 3, stride=2), LayerNorm2d(6, eps=1e-6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        x = self.ln(self.c2(F.relu(self.gn(self.c1(x)))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def layernorm_last():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.LayerNorm(222), nn.Flatten())  # over W, at 224


class LongNames(nn.Module):
    """Module paths past the format's 47 characters (as RegNet's), two alike but for their ends."""

    def __init__(self):
        super().__init__()
        self.a_rather_long_stage_name = nn.Sequential(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()))
        self.a_rather_long_stage_name.add_module("an_even_longer_block_name_than_that_one", nn.Conv2d(4, 4, 1))
        self.a_rather_long_stage_name.add_module("an_even_longer_block_name_than_that_two", nn.Conv2d(4, 4, 1))

    def forward(self, x):
        return torch.flatten(self.a_rather_long_stage_name(x), 1)


class FunctionalPools(nn.Module):
    """F.max_pool2d and F.avg_pool2d (Inception's), and a mean over H and W (MnasNet's global pool)."""

    def __init__(self):
        super().__init__()
        self.a, self.fc = nn.Conv2d(3, 6, 3, padding=1), nn.Linear(6, 4)

    def forward(self, x):
        x = F.avg_pool2d(F.max_pool2d(F.relu(self.a(x)), 3, stride=2, padding=1), kernel_size=2)
        return self.fc(x.mean([2, 3]))


def mean_channels():
    return nn.Sequential(nn.Conv2d(3, 4, 3), MeanOver(1), nn.Flatten())


class MeanOver(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.mean(self.dim, keepdim=True)


def permute_hw():
    return nn.Sequential(nn.Conv2d(3, 4, 3), Permute((0, 1, 3, 2)), nn.Flatten())


class Permute(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        return x.permute(*self.dims)


class Cat3(nn.Module):
    """A concat of three (the image one of them), one read twice, and a sum of three."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 1)
        self.c = nn.Conv2d(15, 4, 1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        y = self.c(torch.cat([a, b, x, a], 1))
        return torch.flatten(y + a + b, 1)


class Cat65(nn.Module):
    """A concat of 65 tensors: one more than the format's concat takes."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 1, 1)

    def forward(self, x):
        return torch.flatten(torch.cat([self.a(x)] * 65, 1), 1)


class CatRows(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.flatten(torch.cat([self.a(x), self.a(x)], 2), 1)


class Mul(nn.Module):
    """A product with a number: not a tensor of the net."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.flatten(self.a(x) * 2.0, 1)


def one_conv(**kw):
    class OneConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, **kw)

        def forward(self, x):
            return torch.flatten(self.conv(x), 1)
    return OneConv()


class Factorized(nn.Module):
    """Inception's factorized 7x7: a 1x7 then a 7x1 convolution, a 3x1 of stride (2, 1), a dilated 1x3."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, (1, 7), padding=(0, 3))
        self.b = nn.Conv2d(6, 6, (7, 1), padding=(3, 0))
        self.c = nn.Conv2d(6, 4, (3, 1), stride=(2, 1), padding=(1, 0), bias=False)
        self.d = nn.Conv2d(4, 4, (1, 3), padding=(0, 2), dilation=(1, 2), groups=2)

    def forward(self, x):
        return torch.flatten(self.d(F.relu(self.c(F.relu(self.b(self.a(x)))))), 1)


def nonsquare():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d((3, 1)), nn.Flatten())


def reflect():
    return one_conv(kernel_size=3, padding=1, padding_mode="reflect")


def ceil_pool():  # max pooling takes ceil=1; average pooling's divisor at the overhang is not modelled
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2, ceil_mode=True), nn.Flatten())


def bicubic():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Upsample(scale_factor=2, mode="bicubic"), nn.Flatten())


class Bilinear(nn.Module):
    """Bilinear upsampling as a module (corners aligned) and as F.interpolate (not), a U-Net's decoder."""

    def __init__(self):
        super().__init__()
        self.e1, self.e2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e1 = F.relu(self.e1(x))
        d = torch.cat([self.up(F.relu(self.e2(e1))), e1], 1)
        return F.interpolate(self.head(d), scale_factor=3, mode="bilinear")


class Decoder(nn.Module):
    """Nearest upsampling as a module and as F.interpolate, added to encoder maps."""

    def __init__(self):
        super().__init__()
        self.enc1, self.enc2 = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 6, 3, padding=1)
        self.pool, self.up = nn.MaxPool2d(3), nn.Upsample(scale_factor=3)
        self.dec, self.head = nn.Conv2d(6, 6, 3, padding=1), nn.Conv2d(6, 2, 1)
        self.fc = nn.Linear(2 * 24 * 24, 4)

    def forward(self, x):
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(self.pool(e1)))
        d = self.dec(self.up(e2) + e1)
        d = F.interpolate(self.head(d), scale_factor=2, mode="nearest")
        return self.fc(torch.flatten(d, 1))


def linear_on_map():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Linear(222, 5))  # over W, at 224: PyTorch runs it


def gelu_tanh():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.GELU(approximate="tanh"), nn.Flatten())


class Channels(nn.Module):
    """Channels taken apart in every form the importer reads — torch.split by sizes, x.narrow, x[:, a:b],
    x.chunk unpacked — and shuffled in both of ShuffleNet's spellings (view, transpose, view; and
    reshape, permute, flatten), the groups' sizes read from x.size()."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 12, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv3 = nn.Conv2d(12, 6, 1)
        self.fc = nn.Linear(6, 5)

    @staticmethod
    def shuffle(x, g):
        n, c, h, w = x.size()
        return x.view(n, g, c // g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        a, b, c = torch.split(x, [4, 6, 2], dim=1)
        x = torch.cat((a, b, c[:, 1:2], x.narrow(1, 3, 5), self.conv2(x[:, 8:12])), 1)  # 4 + 6 + 1 + 5 + 4 channels
        x = self.shuffle(x, 4)
        y1, y2 = x.chunk(2, dim=1)
        x = torch.cat((y2, y1), 1).reshape(x.shape[0], 5, 4, x.shape[2], x.shape[3]).permute(0, 2, 1, 3, 4).flatten(1, 2)
        x = self.conv3(x[:, :12])
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def chunk_rows():
    class ChunkRows(nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=2)
            return a + b
    return nn.Sequential(nn.Conv2d(3, 4, 3), ChunkRows())


def view_5d():  # a 5-d view that is no shuffle's (its groups are not put back together)
    class View5(nn.Module):
        def forward(self, x):
            return x.view(x.size(0), 2, 2, x.size(2), x.size(3)).sum(1)
    return nn.Sequential(nn.Conv2d(3, 4, 3), View5())


class InPlace(nn.Module):
    """What a module runs in place where lrcnn does not — Hardswish and SiLU modules, a function's
    inplace=True — each where a segment may start, and a stochastic depth the importer traces as a function (torchvision's
    MobileNetV3, EfficientNet and ConvNeXt): tests/test_torch_plan.py checkpoints from each."""

    def __init__(self):
        super().__init__()
        import torchvision.ops
        self.c1, self.b1, self.a1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Hardswish(inplace=True)
        self.c2, self.a2 = nn.Conv2d(8, 8, 3, padding=1), nn.SiLU(inplace=True)
        self.c3, self.c4 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.drop = torchvision.ops.StochasticDepth(0.5, "row")
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.a1(self.b1(self.c1(x)))
        y = self.a2(self.c2(x))
        y = F.hardswish(self.c3(y), inplace=True)
        y = y + self.drop(self.c4(y))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


class DenseStart(nn.Module):
    """DenseNet's block: its first layer concatenates the block's input alone (torch.cat([x], 1), a
    copy in PyTorch, the same map to lrcnn's importer), after a pool whose rows a 2PS band hands on;
    the block's last cat reads the pool's output directly; then a nearest upsampling, whose backward
    keeps nothing (so PyTorch's checkpoint of it alone keeps nothing, not even its input).
    tests/test_torch_plan.py checkpoints from the first cat and the upsampling, and bands across
    both."""

    def __init__(self):
        super().__init__()
        self.stem, self.pool = nn.Conv2d(3, 8, 3, padding=1), nn.MaxPool2d(3, 1, 1)
        self.n1, self.c1 = nn.BatchNorm2d(8), nn.Conv2d(8, 4, 3, padding=1)
        self.n2, self.c2 = nn.BatchNorm2d(12), nn.Conv2d(12, 4, 3, padding=1)
        self.up, self.fc = nn.Upsample(scale_factor=2), nn.Linear(16, 10)

    def forward(self, x):
        features = [self.pool(self.stem(x))]
        for n, c in ((self.n1, self.c1), (self.n2, self.c2)):
            features.append(c(F.relu(n(torch.cat(features, 1)))))
        return self.fc(F.adaptive_avg_pool2d(self.up(torch.cat(features, 1)), 1).flatten(1))


class Relus(nn.Module):
    """Convolutions each followed by F.relu: a segment's graph numbers its relus afresh (split_module),
    so a row segment after a checkpoint of the first two holds `relu` (its input) and `relu_1` where
    the whole graph held `relu_1` and `relu_2`; lrcnn_torch finds each node's layer by what the node
    carries, not by its name (by name, the segment was refused: its relu_1 was c2's)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.c3(F.relu(self.c2(F.relu(self.c1(x))))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class LinearOverChannels(nn.Module):
    """ConvNeXt's block: a depthwise convolution, then a LayerNorm and two Linears over the channels
    of the map put channels-last, scaled by a parameter of the module's own; lrcnn makes the
    Linears 1x1 convolutions, so vdnn-conv moves the maps they read (a Linear saves a 2-d view)."""

    def __init__(self):
        super().__init__()
        self.stem, self.dw = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 7, padding=3, groups=8)
        self.norm, self.up, self.act, self.down = nn.LayerNorm(8), nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8)
        self.scale = nn.Parameter(torch.full((8, 1, 1), 0.5))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        y = self.down(self.act(self.up(self.norm(self.dw(x).permute(0, 2, 3, 1))))).permute(0, 3, 1, 2)
        x = x + self.scale * y
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class SizeRead(nn.Module):
    """A segmentation model's shape: the input's size read first and its logits upsampled back to it
    last (torchvision's FCN, DeepLabV3 and LR-ASPP); the read goes to the segment of its reader,
    so that a row segment over what comes before hands on its map alone."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.c3, self.head = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 2, 1)

    def forward(self, x):
        size = x.shape[-2:]
        y = self.head(F.relu(self.c3(F.relu(self.c2(F.relu(self.c1(x)))))))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


class Dropped(nn.Module):
    """Dropout between two convolutions: a mask a value, which a band cannot draw as the plain module
    does (a row segment over it is refused, with the reason)."""

    def __init__(self):
        super().__init__()
        self.c1, self.drop, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Dropout(0.2), nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.c2(self.drop(F.relu(self.c1(x))))), 1).flatten(1))
