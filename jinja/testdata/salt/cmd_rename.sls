clear_cache:
  cmd.saltutil.clear_cache:
    - tgt: {{ data['id'] }}
refresh_pillar:
  cmd.saltutil.refresh_pillar:
    - tgt: {{ data['id'] }}
    - expr_form: glob
