"""Policy `mlp`: a torch MLP run once per vector step on the chosen device and thread count. The
learners' actor-critic network is adapters._kit.nets.actor_critic.

Any observation space goes in, flattened (a Dict or Tuple observation: its parts one after the other, a
Discrete part as its index); the actions it picks are Discrete (argmax) or Box (tanh, per dimension).
"""
from adapters._kit.nets import flat_obs, policy_widths
from rlbench.api import Unsupported, register_policy


@register_policy("mlp")
def build_mlp(spec, observation_space, action_space, seed):
    from gymnasium import spaces
    if not isinstance(action_space, (spaces.Discrete, spaces.Box)):
        raise Unsupported(f"{type(action_space).__name__} actions: policy mlp picks Discrete, Box actions only")
    try:
        import torch
    except ImportError:
        raise Unsupported("package not installed: torch") from None
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unsupported("no CUDA device")
    torch.set_num_threads(spec.threads)
    torch.manual_seed(seed)
    discrete = isinstance(action_space, spaces.Discrete)
    start = int(getattr(action_space, "start", 0))
    sizes = policy_widths(spec.hidden, observation_space, action_space)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers[:-1]).to(spec.device).eval()
    device = torch.device(spec.device)

    def act(obs):
        with torch.inference_mode():
            x = torch.as_tensor(flat_obs(obs)).to(device, torch.float32)
            out = net(x)
            actions = out.argmax(-1) + start if discrete else torch.tanh(out).reshape(len(x), *action_space.shape)
            return actions.cpu().numpy()  # .cpu() waits for the device, so the time is real
    act.net = net  # for samplers that share or train the parameters
    return act
