"""WebShop (Yao et al. 2022): a text shopping site, its purchase reward, and a
generator of catalogues in the official file schema (docs/environments.md).

- ``catalogue``: products and goals, the official files' loader, the generator;
- ``schema``: the official files' names, reading them, and the checks of each record;
- ``search``: BM25 over the products' indexed text;
- ``reward``: the official purchase reward (type x matched attributes, options, price);
- ``env``: the pages, the actions and the episode (``WebShopEnv``), and the scripted expert.
- ``commands``: ``mage webshop generate|check`` and ``mage data generate webshop``.
"""
