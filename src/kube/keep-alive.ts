/**
 * keptAlive(): the same credentials as a KubeConfig, whose API calls, watches and log reads share
 * one keep-alive agent. client-node 1.x makes a new https.Agent for every request, so each call
 * would pay a new TCP connection and a full TLS handshake with the apiserver: on a busy 2-core
 * node that is a large part of what a short call costs. The agent is made once, from the options
 * client-node itself gives its first one (CA, client certificate, servername, verification), so
 * nothing about trust changes. WebSockets (attach, exec) keep their own connection each.
 */
import https from 'node:https';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import type { RequestInit } from 'node-fetch';

class KeepAliveKubeConfig extends KubeConfig {
  private shared: https.Agent | undefined;

  /** The shared agent, made from the TLS options of the one client-node just made (then dropped). */
  private agentLike(made: unknown): https.Agent | undefined {
    if (!(made instanceof https.Agent)) return undefined; // a proxy agent: left as it is
    this.shared ??= new https.Agent({ ...made.options, keepAlive: true });
    made.destroy();
    return this.shared;
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const agent = this.agentLike(context.getAgent());
    if (agent) context.setAgent(agent);
  }

  override async applyToFetchOptions(opts: https.RequestOptions): Promise<RequestInit> {
    const init = await super.applyToFetchOptions(opts);
    const agent = this.agentLike(init.agent);
    return agent ? { ...init, agent } : init;
  }
}

export function keptAlive(kc: KubeConfig): KubeConfig {
  const copy = new KeepAliveKubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.getCurrentContext(),
  });
  return copy;
}
