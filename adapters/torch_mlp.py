"""Policy `mlp`: a torch MLP run once per vector step on the chosen device and thread count; and the
actor-critic network every learner (rlpyt-sync, impala, seed, a3c, ppo) trains."""
import math

from rlbench.api import Unsupported, register_policy


@register_policy("mlp")
def build_mlp(spec, observation_space, action_space, seed):
    try:
        import torch
    except ImportError:
        raise Unsupported("package not installed: torch") from None
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    torch.set_num_threads(spec.threads)
    torch.manual_seed(seed)
    discrete = hasattr(action_space, "n")
    sizes = [math.prod(observation_space.shape), *spec.hidden,
             int(action_space.n) if discrete else math.prod(action_space.shape)]
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers[:-1]).to(spec.device).eval()
    device = torch.device(spec.device)

    def act(obs):
        with torch.inference_mode():
            x = torch.as_tensor(obs).to(device, torch.float32).reshape(len(obs), -1)
            out = net(x)
            actions = out.argmax(-1) if discrete else torch.tanh(out).reshape(len(obs), *action_space.shape)
            return actions.cpu().numpy()  # .cpu() waits for the device, so the time is real
    act.net = net  # for samplers that share or train the parameters
    return act


def actor_critic(obs_size: int, hidden: tuple, n_actions: int):
    """A shared tanh MLP torso with a policy-logits head and a value head."""
    import torch

    class ActorCritic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layers, size = [], obs_size
            for h in hidden:
                layers += [torch.nn.Linear(size, h), torch.nn.Tanh()]
                size = h
            self.torso = torch.nn.Sequential(*layers)
            self.pi = torch.nn.Linear(size, n_actions)
            self.v = torch.nn.Linear(size, 1)

        def forward(self, x):
            z = self.torso(x)
            return self.pi(z), self.v(z).squeeze(-1)

    return ActorCritic()
