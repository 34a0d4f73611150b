{#- Accept the key of a new web minion: salt/auth fires on every
    authentication attempt; only "pend" (a new key waiting) from a minion
    named web* is accepted. Some failure paths send no "act" at all, hence
    data.get. #}
{% if data.get('act') == 'pend' and data['id'].startswith('web') %}
accept_key:
  wheel.key.accept:
    - args:
      - match: {{ data['id'] }}
{% endif %}
