"""shariqiqbal2810/MAAC: main.py's run() loop, written out as it is there (main.py itself cannot be imported: it
needs OpenAI baselines, gym and the multi-agent particle environments, which only supply the environment), over a
synthetic 3-agent vectorised environment of 2 rollout threads (random observations and rewards, discrete actions):
AttentionSAC.init_from_env, the repository's ReplayBuffer, rollouts with model.step(explore=True), then once the
buffer holds a batch, model.update_critic / update_policies / update_all_targets, and model.save, as main.py does.
tensorboardX (its SummaryWriter logger, which update_policies always calls) stands in when missing."""
import os
import tempfile
from types import SimpleNamespace

import smoke_support

smoke_support.stand_in("tensorboardX")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.autograd import Variable  # noqa: E402
from tensorboardX import SummaryWriter  # noqa: E402

from algorithms.attention_sac import AttentionSAC  # noqa: E402
from utils.buffer import ReplayBuffer  # noqa: E402

N_AGENTS, OBS_DIM, N_ACTIONS = 3, 6, 4
config = SimpleNamespace(n_rollout_threads=2, buffer_length=1000, n_episodes=2, episode_length=5,
                         steps_per_update=4, num_updates=1, batch_size=8, save_interval=1000,
                         pol_hidden_dim=16, critic_hidden_dim=16, attend_heads=4, pi_lr=0.001, q_lr=0.001,
                         tau=0.001, gamma=0.99, reward_scale=100., use_gpu=False)


class SyntheticVecEnv:
    """Stands in for main.py's DummyVecEnv over a particle environment: per-thread, per-agent observations."""

    observation_space = [SimpleNamespace(shape=(OBS_DIM,)) for _ in range(N_AGENTS)]
    action_space = [SimpleNamespace(n=N_ACTIONS) for _ in range(N_AGENTS)]

    def _obs(self):
        obs = np.empty((config.n_rollout_threads, N_AGENTS), dtype=object)
        for i in range(config.n_rollout_threads):
            for j in range(N_AGENTS):
                obs[i, j] = np.random.randn(OBS_DIM).astype(np.float32)
        return obs

    def reset(self):
        return self._obs()

    def step(self, actions):
        assert len(actions) == config.n_rollout_threads and len(actions[0]) == N_AGENTS
        rewards = np.random.randn(config.n_rollout_threads, N_AGENTS)
        dones = np.zeros((config.n_rollout_threads, N_AGENTS), dtype=bool)
        return self._obs(), rewards, dones, [{} for _ in range(config.n_rollout_threads)]

    def close(self):
        pass


run_num = 1
run_dir = tempfile.mkdtemp(prefix="revive-maac-")
logger = SummaryWriter(os.path.join(run_dir, "logs"))
torch.manual_seed(run_num)
np.random.seed(run_num)
env = SyntheticVecEnv()
model = AttentionSAC.init_from_env(env,
                                   tau=config.tau,
                                   pi_lr=config.pi_lr,
                                   q_lr=config.q_lr,
                                   gamma=config.gamma,
                                   pol_hidden_dim=config.pol_hidden_dim,
                                   critic_hidden_dim=config.critic_hidden_dim,
                                   attend_heads=config.attend_heads,
                                   reward_scale=config.reward_scale)
replay_buffer = ReplayBuffer(config.buffer_length, model.nagents,
                             [obsp.shape[0] for obsp in env.observation_space],
                             [acsp.n for acsp in env.action_space])
t = 0
updates = 0
for ep_i in range(0, config.n_episodes, config.n_rollout_threads):
    obs = env.reset()
    model.prep_rollouts(device='cpu')

    for et_i in range(config.episode_length):
        torch_obs = [Variable(torch.Tensor(np.vstack(obs[:, i])),
                              requires_grad=False)
                     for i in range(model.nagents)]
        torch_agent_actions = model.step(torch_obs, explore=True)
        agent_actions = [ac.data.numpy() for ac in torch_agent_actions]
        actions = [[ac[i] for ac in agent_actions] for i in range(config.n_rollout_threads)]
        next_obs, rewards, dones, infos = env.step(actions)
        replay_buffer.push(obs, agent_actions, rewards, next_obs, dones)
        obs = next_obs
        t += config.n_rollout_threads
        if (len(replay_buffer) >= config.batch_size and
            (t % config.steps_per_update) < config.n_rollout_threads):
            model.prep_training(device='cpu')
            for u_i in range(config.num_updates):
                sample = replay_buffer.sample(config.batch_size,
                                              to_gpu=config.use_gpu)
                model.update_critic(sample, logger=logger)
                model.update_policies(sample, logger=logger)
                model.update_all_targets()
                updates += 1
            model.prep_rollouts(device='cpu')
    ep_rews = replay_buffer.get_average_rewards(
        config.episode_length * config.n_rollout_threads)
    for a_i, a_ep_rew in enumerate(ep_rews):
        logger.add_scalar('agent%i/mean_episode_rewards' % a_i,
                          a_ep_rew * config.episode_length, ep_i)

model.save(os.path.join(run_dir, 'model.pt'))
env.close()
assert updates >= 1, "no update ran"

# the critic's loss on a fresh sample, as update_critic computes it (for the success line)
model.prep_training(device='cpu')
obs_b, acs_b, rews_b, next_obs_b, dones_b = replay_buffer.sample(config.batch_size)
critic_rets = model.critic(list(zip(obs_b, acs_b)), regularize=True)
q_loss = sum(torch.nn.functional.mse_loss(pq, rews_b[a_i].view(-1, 1)) for a_i, (pq, regs) in enumerate(critic_rets))
print("updates run:", updates)
smoke_support.succeeded(q_loss)
