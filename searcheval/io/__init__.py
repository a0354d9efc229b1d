"""Every file searcheval reads or writes: the seed fixtures, BEIR and TREC files, production traces,
and the shared readers (`files`). Loaders return the nouns of `searcheval.types`; every refusal is an
`InputError` naming the file, line and field. Imports only errors, types and defaults."""
