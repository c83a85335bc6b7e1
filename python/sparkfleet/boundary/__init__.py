"""The Ansible boundary: the one place the collection's plugins enter the library.

In: Ansible's values as plugins hand them (lazily templated containers, strings where numbers were meant, host facts
as the fact modules read them). Out: plain JSON values back to Jinja, or a refusal (ValueError, PlanError) naming
the variable.
- adapters: Ansible's values to the library's models (host facts, a model as staged or described, an instance, a
  cluster's ranks), and plain() that copies lazily templated containers;
- filters: one function per filter of plugins/filter, named as the filter (plugins/plugin_utils/filters.py calls
  them); each converts, calls a wing and dumps.
The command line is the other boundary (sparkfleet.cli, sparkfleet.planargs).
"""
