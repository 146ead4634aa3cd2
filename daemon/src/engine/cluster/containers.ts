/** The agent's view of the container engine: task containers are ordinary containers, found by their label. */
import type { EventBus } from '../events.js';
import type { DnsAnswers, NetworkHost } from '../../host/network.js';
import type { ContainerService } from '../containers/service.js';
import { TASK_LABEL, type TaskContainers } from './agent.js';
import type { ContainerLogReader } from './remotelogs.js';

export function taskContainers(containers: ContainerService, events: EventBus, dns?: Pick<NetworkHost, 'startDns' | 'stopDns'>, readLog?: ContainerLogReader): TaskContainers {
  return {
    readLog,
    ...(dns ? { startDns: (id: string, pid: number, answers: DnsAnswers) => dns.startDns(id, pid, answers), stopDns: (id: string) => dns.stopDns(id) } : {}),
    create: async (body, name) => (await containers.create(body, name)).Id,
    start: (id) => containers.start(id),
    stop: (id, timeoutSeconds) => containers.stop(id, { timeoutSeconds }),
    remove: (id) => containers.remove(id, { force: true, volumes: true }),
    state: (id) => {
      const r = containers.store.find(id);
      if (!r) return undefined;
      return { running: r.State.Running || r.State.Restarting, exitCode: r.State.ExitCode, pid: r.State.Pid, error: r.State.Error };
    },
    taskContainers: () =>
      containers
        .all()
        .filter((r) => r.Config.Labels?.[TASK_LABEL])
        .map((r) => ({ id: r.Id, taskId: r.Config.Labels[TASK_LABEL]! })),
    onExit: (fn) =>
      events.subscribe((e) => {
        if (e.Type === 'container' && e.Action === 'die') fn(e.Actor.ID);
      }),
  };
}
