"""Models and a data set that real_models.py's diverging cases train, whose own code makes
no case's first non-finite value: the GAN's discriminator, a transform module and the
images it normalises, a small segmentation model. The modules whose forward does make it
(CausalSelfAttention, Generator, RNNModel) stay in real_models.py: the oracle and the tests
name that file's lines."""

import torch
from torch import nn


class Discriminator(nn.Module):
    def __init__(self, size=16):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(size, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, x):
        return torch.sigmoid(self.main(x)).view(-1)


class Normalize(nn.Module):
    """torchvision.transforms.Normalize is a module, called on every sample."""

    def __init__(self, mean, std):
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, x):
        return (x - self.mean) / self.std


class Images(torch.utils.data.Dataset):
    """Twelve images; image 9 (step 2 at 4 a batch) was saved unscaled (0..255)."""

    def __init__(self):
        self.transform = Normalize(0.5, 0.25)
        self.images = torch.rand(12, 16)
        self.images[9] *= 255.0 * 40

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), i % 4


class TinySegmenter(nn.Module):
    """A segmentation model's shape: a dict of per-pixel class scores."""

    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return {"out": self.classifier(self.backbone(x))}
