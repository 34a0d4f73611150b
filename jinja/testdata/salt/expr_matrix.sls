{% set v = data['v'] %}
{% set w = data['w'] %}
matrix:
  runner.test.arg:
    - args:
      - "eq={{ v == w }} ne={{ v != w }} in={{ v in data['coll'] }} cat={{ v ~ w }} str={{ v|string }} len={{ data['coll']|length }}"
      - "int={{ v|int }} float={{ v|float }} first={{ data['coll']|first }} last={{ data['coll']|last }} join={{ data['coll']|join('-') }}"
      - "slice={{ data['coll'][1:] }} step={{ data['coll'][::2] }} rev={{ data['coll'][::-1] }} neg={{ data['coll'][-1] }}"
      - "truth={{ 'T' if v else 'F' }} not={{ not w }} and={{ v and w }} or={{ v or w }}"
