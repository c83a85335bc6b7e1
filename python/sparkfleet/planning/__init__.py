"""Planning: what one instance, and one host's instances together, are given.

In: host facts (sparkfleet.models.HostFacts), a ModelProfile (sparkfleet.reading), an Intent, and for a host the
instances it serves.
Out: a ServePlan per instance (argv, env, systemd limits and memory, each with its reason) and a HostPlan per host.
- planner: plan(), a pipeline of named stages (refuse an open bind, consent for a repository's code, size, the
  rules' settings, the rules, assemble);
- choices: the intent resolved against the host, the model and the release (context, scheduler, KV dtype,
  speculation), and the KV pool (sparkfleet.kv);
- budget, memory, loading: non-KV memory, the KV the room allows, and what loading the checkpoint holds;
- levers: the A/B levers an intent pulls in place of the plan's choice (the MoE backend);
- cautions, answers, requestsize, remotecode: warnings and refusals after the plan, the known-answer check, the
  largest request body, whether the repository's own code would run;
- hostplan, memguard: every instance of one host together (names, ports, accounts, memory) and the memory guard's
  floors that keep the host from wedging.
The flag and env rules are sparkfleet.planning.rules; the planner applies them.
"""
