"""What a host is given besides its plans: the values the roles' templates write.

In: a ServePlan or HostPlan (sparkfleet.planning) and the role's settings.
Out: plain values the templates render, each with its reason, never a decision left to Jinja:
- hardening, directives, unitfile: every unit kind's systemd sandbox (from the directives all share), and one
  token per unit value (or a refusal);
- instancefiles: what the vllm_serve role writes for each instance, and which instances restart after a write;
- door: the front door (nginx, its router and its keys) in front of the loopback-only instances;
- webui: the optional chat UI, its locked install and its settings;
- monitoring: Prometheus' scrape targets, alert rules and the Grafana dashboard;
- cluster, link: the interconnect environment of a multi-node instance and the link preflight's verdicts.
"""
