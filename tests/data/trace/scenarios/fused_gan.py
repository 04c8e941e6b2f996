"""A GAN with a sigmoid discriminator and the textbook losses (log D(x), log(1 - D(G(z)))).

Step 2 feeds the discriminator fakes far outside the data: its sigmoid rounds to exactly 1 for
some, binary_cross_entropy on the sigmoid saturates there and log(1 - D(G(z))) meets log(0).
log(D(x)) of the real data would meet it only if the sigmoid rounded to 0, which it never does.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def main(steps=3):
    torch.manual_seed(7)
    discriminator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1), nn.Sigmoid())
    generator = nn.Linear(3, 2)
    d_optimizer = torch.optim.SGD(discriminator.parameters(), lr=0.01)
    g_optimizer = torch.optim.SGD(generator.parameters(), lr=0.01)
    with torch.no_grad():
        discriminator[0].weight.fill_(1.0)
        discriminator[0].bias.fill_(0.0)
        discriminator[2].weight.fill_(3.0)
        discriminator[2].bias.fill_(0.0)
    for step in range(steps):
        real = torch.randn(8, 2) * 0.01
        fake = generator(torch.randn(8, 3))
        if step == 2:
            fake = fake * 1e4
        g_loss = F.binary_cross_entropy(discriminator(fake), torch.ones(8, 1))
        g_optimizer.zero_grad()
        g_loss.backward()
        g_optimizer.step()
        d_loss = -(torch.log(discriminator(real)) + torch.log(1 - discriminator(fake.detach()))).mean()
        d_optimizer.zero_grad()
        d_loss.backward()
        d_optimizer.step()

if __name__ == "__main__":
    main()
