#!/usr/bin/env python3
"""A U-Net (Ronneberger, Fischer and Brox, 2015) as a PyTorch module, for tools/torch2net.py.

    python3 tools/torch2net.py tools/unet.py:unet --pixel-loss --image 512 --name unet -o nets/unet.net
    python3 tools/torch2net.py tools/unet.py:unet_paper --pixel-loss --image 512 --name unet-paper -o nets/unet-paper.net

The common padded variant: four levels of two 3x3 convolutions (batch norm, ReLU) with 2x2 max
pooling between them, 64 channels doubling to 1024 at the bottom; each decoder level upsamples by 2
and halves the channels, concatenates the encoder map of its size and applies two 3x3
convolutions; a 1x1 convolution gives 2 classes a pixel. Padding keeps every map the input's size
over a power of two, so the skips need no cropping (the paper's unpadded version crops them).
`unet` upsamples by 2 (nearest) and halves the channels with a 3x3 convolution (34.5 M parameters:
the shipped nets/unet.net, written before the net format had transposed convolutions, and what the
report's U-Net figures use); `unet_paper` with the paper's 2x2 transposed "up-convolution" of
stride 2 (31.0 M, the paper's count).
"""
import torch
import torch.nn as nn


def double(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
                         nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Up(nn.Module):
    def __init__(self, c_in, transposed=False):
        super().__init__()
        self.up = nn.Identity() if transposed else nn.Upsample(scale_factor=2)
        self.conv = nn.ConvTranspose2d(c_in, c_in // 2, 2, stride=2) if transposed else nn.Conv2d(c_in, c_in // 2, 3, padding=1)
        self.convs = double(c_in, c_in // 2)

    def forward(self, x, skip):
        return self.convs(torch.cat([skip, self.conv(self.up(x))], 1))


class UNet(nn.Module):
    def __init__(self, channels=3, classes=2, base=64, transposed=False):
        super().__init__()
        c = [base * 2 ** i for i in range(5)]
        self.inc = double(channels, c[0])
        self.downs = nn.ModuleList(nn.Sequential(nn.MaxPool2d(2), double(c[i], c[i + 1])) for i in range(4))
        self.ups = nn.ModuleList(Up(c[i + 1], transposed) for i in reversed(range(4)))
        self.outc = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for d in self.downs:
            skips.append(d(skips[-1]))
        x = skips.pop()
        for u in self.ups:
            x = u(x, skips.pop())
        return self.outc(x)


def unet():
    return UNet()


def unet_paper():
    return UNet(transposed=True)
