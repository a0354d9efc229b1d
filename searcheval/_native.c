/* searcheval's compiled parts: loops that Python and numpy can only run a pass at a time.
 *
 * scan_dict_run: one pass over a run given as `{query: {doc: score}}`, for the dict path at
 * scale (`searcheval.metrics.dicts`).
 *
 *     Python can only read such a run a pass at a time (checking the ids' types, the scores'
 *     types, reading the scores), each pass about as long as iterating the dicts at all; then it
 *     looks every judged document up in its query's ranking. Here all of it is one walk over the
 *     dicts: every id and score is checked and read once, and the judged documents are looked up
 *     while their query's ranking is at hand.
 *
 *     scan_dict_run(run, index, docs, starts)
 *         -> (scores, run_starts, where, judged_score) or None
 *
 *     run:    the run as the user gave it.
 *     index:  {query: c}, the judged queries' positions (`dicts.DictQrels.index`).
 *     docs:   every judged document, query by query (`DictQrels.docs`); query c's are
 *             docs[starts[c]:starts[c + 1]].
 *     starts: int64 buffer of len(index) + 1.
 *
 *     Returns four writable buffers (read with numpy.frombuffer):
 *       scores        float64, every score of the run in its order;
 *       run_starts    int64 (len(run) + 1,), where each of the run's queries starts in `scores`;
 *       where         int64 (len(index),), each judged query's position in the run, -1: absent;
 *       judged_score  float64, one per judged document: its score in its query's ranking, NaN:
 *                     not retrieved.
 *     or None when the run is not in the shape the dict engine takes as it is (a query id or a
 *     document id that is not exactly a str or is empty, a ranking that is not a dict, a score
 *     that is not an int or a float -- bool refused -- or not finite): the caller then takes the
 *     dict engine, which converts or refuses with its clear error, so both give the same answers.
 *
 * string_hashes: the 64-bit hash of each string of a pyarrow string array
 * (`searcheval.io.trec.string_hashes`, whose numpy code computes the same numbers eight bytes
 * at a time over every string at once, with the temporaries of a pass per word).
 *
 *     string_hashes(offsets, data, first, n, width) -> buffer of n uint64
 *
 *     offsets: the array's offsets buffer, `width` bytes each (4: string, 8: large_string);
 *     data:    its bytes; first: the array's offset (a slice's first row); n: its length.
 *
 * repeats_within: whether a group of keys holds one twice (`searcheval.io.trec.repeats_within`,
 * the duplicate-judgment check of judgments grouped by query), a table per group instead of
 * numpy's sort of every key.
 *
 * parse_run_lines: a block of a TREC run file (`qid Q0 docid rank score tag`) in one pass over
 * its bytes (`searcheval.io.trec.iter_run_chunks`): the rows of its whole queries, each document
 * id's hash as string_hashes computes it, each score as a double.
 *
 *     parse_run_lines(data, final, delimiter)
 *         -> (consumed, qids, q, offsets, docs, hashes, scores) or None
 *
 *     data:      bytes of whole lines (the file's last bytes when `final`, which may end without
 *                "\n"); delimiter: ord(" ") or ord("\t").
 *     consumed:  the bytes read: all of them when `final`, else up to the last query's first
 *                line (that query may go on in the next block); 0: the block is one query.
 *     qids:      the queries' ids in order (str); q: int32, each row's query (0, 1, ...);
 *     offsets:   int32 (rows + 1), docs: each row's document id, as a pyarrow string array's
 *                buffers; hashes: uint64, each id's hash; scores: float64.
 *     or None when a line is not in the plain shape: exactly six non-empty fields between single
 *     delimiters, printable ASCII, a decimal score (`-`, digits, `.`, exponent) that is finite.
 *     The caller then reads the rest with pyarrow's reader, which takes or refuses it: what this
 *     takes, both read the same (a score rounded correctly either way: exact products of
 *     powers of ten up to 10^22 and at most 2^53, else Eisel and Lemire's 128-bit product,
 *     else, near a halfway point or subnormal, Python's own correctly rounded strtod).
 *
 * All are optional: an install without a C compiler runs the Python and numpy code instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The score `value` as a double in *out; 0 when it is not one the engine takes as it is. */
static int
score_of(PyObject *value, double *out)
{
    if (PyFloat_Check(value)) {
        *out = PyFloat_AS_DOUBLE(value);
    }
    else if (PyLong_Check(value) && !PyBool_Check(value)) {
        *out = PyLong_AsDouble(value);
        if (*out == -1.0 && PyErr_Occurred()) { /* past a double's range */
            PyErr_Clear();
            return 0;
        }
    }
    else {
        return 0;
    }
    return isfinite(*out);
}

static int
is_id(PyObject *key)
{
    return PyUnicode_CheckExact(key) && PyUnicode_GET_LENGTH(key) > 0;
}

static PyObject *
scan_dict_run(PyObject *self, PyObject *args)
{
    PyObject *run, *index, *docs;
    Py_buffer starts_view;
    if (!PyArg_ParseTuple(args, "O!O!O!y*", &PyDict_Type, &run, &PyDict_Type, &index,
                          &PyList_Type, &docs, &starts_view))
        return NULL;
    PyObject *result = NULL, *scores = NULL, *run_starts = NULL, *where = NULL,
             *judged_score = NULL;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    Py_ssize_t queries = starts_view.len / (Py_ssize_t)sizeof(int64_t) - 1;
    if (queries < 0 || starts[queries] != PyList_GET_SIZE(docs)) {
        PyErr_SetString(PyExc_ValueError, "starts does not match docs");
        goto done;
    }

    /* the rows, and the shape of the run's outer dict */
    Py_ssize_t pos = 0, rows = 0;
    PyObject *query, *ranking;
    while (PyDict_Next(run, &pos, &query, &ranking)) {
        if (!is_id(query) || !PyDict_Check(ranking)) {
            result = Py_None;
            goto done;
        }
        rows += PyDict_GET_SIZE(ranking);
    }
    Py_ssize_t judged = PyList_GET_SIZE(docs);
    scores = PyByteArray_FromStringAndSize(NULL, rows * (Py_ssize_t)sizeof(double));
    run_starts = PyByteArray_FromStringAndSize(
        NULL, (PyDict_GET_SIZE(run) + 1) * (Py_ssize_t)sizeof(int64_t));
    where = PyByteArray_FromStringAndSize(NULL, queries * (Py_ssize_t)sizeof(int64_t));
    judged_score = PyByteArray_FromStringAndSize(NULL, judged * (Py_ssize_t)sizeof(double));
    if (!scores || !run_starts || !where || !judged_score)
        goto done;
    double *score = (double *)PyByteArray_AS_STRING(scores);
    int64_t *run_start = (int64_t *)PyByteArray_AS_STRING(run_starts);
    int64_t *at = (int64_t *)PyByteArray_AS_STRING(where);
    double *found = (double *)PyByteArray_AS_STRING(judged_score);
    for (Py_ssize_t c = 0; c < queries; c++)
        at[c] = -1;
    for (Py_ssize_t j = 0; j < judged; j++)
        found[j] = NAN;

    /* every score checked and read; each judged query's documents looked up in its ranking */
    Py_ssize_t p = 0, row = 0;
    pos = 0;
    while (PyDict_Next(run, &pos, &query, &ranking)) {
        run_start[p] = row;
        Py_ssize_t inner = 0;
        PyObject *doc, *value;
        while (PyDict_Next(ranking, &inner, &doc, &value)) {
            if (!is_id(doc) || !score_of(value, &score[row])) {
                result = Py_None;
                goto done;
            }
            row++;
        }
        PyObject *c_object = PyDict_GetItemWithError(index, query);
        if (c_object != NULL) {
            Py_ssize_t c = PyLong_AsSsize_t(c_object);
            if (c < 0 || c >= queries) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "index names a query past starts");
                goto done;
            }
            at[c] = p;
            for (int64_t j = starts[c]; j < starts[c + 1]; j++) {
                value = PyDict_GetItemWithError(ranking, PyList_GET_ITEM(docs, j));
                if (value != NULL)
                    score_of(value, &found[j]); /* checked above, with the rest of the ranking */
                else if (PyErr_Occurred())
                    goto done;
            }
        }
        else if (PyErr_Occurred()) {
            goto done;
        }
        p++;
    }
    run_start[p] = row;
    result = PyTuple_Pack(4, scores, run_starts, where, judged_score);

done:
    if (result == Py_None)
        Py_INCREF(Py_None);
    Py_XDECREF(scores);
    Py_XDECREF(run_starts);
    Py_XDECREF(where);
    Py_XDECREF(judged_score);
    PyBuffer_Release(&starts_view);
    return result;
}

#define HASH_LENGTH 0x9E3779B97F4A7C15ULL
#define HASH_WORD 0xFF51AFD7ED558CCDULL

static uint64_t
mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

/* The hash of n bytes: their length, then each 8 bytes as a little-endian word (zeros past
 * the end), then mix. io/trec.py's numpy_string_hashes computes the same numbers. */
static inline uint64_t
hash_bytes(const unsigned char *bytes, int64_t n)
{
    uint64_t h = (uint64_t)n * HASH_LENGTH;
    for (int64_t at = 0; at < n; at += 8) {
        int64_t take = n - at < 8 ? n - at : 8;
        uint64_t word = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (take == 8)
            memcpy(&word, bytes + at, 8); /* one load */
        else
            for (int64_t k = 0; k < take; k++)
                word |= (uint64_t)bytes[at + k] << (8 * k);
#else
        for (int64_t k = 0; k < take; k++)
            word |= (uint64_t)bytes[at + k] << (8 * k);
#endif
        h ^= word;
        h *= HASH_WORD;
        h ^= h >> 29;
    }
    return mix(h);
}

static PyObject *
string_hashes(PyObject *self, PyObject *args)
{
    Py_buffer offsets_view, data_view;
    Py_ssize_t first, n;
    int width;
    if (!PyArg_ParseTuple(args, "y*y*nni", &offsets_view, &data_view, &first, &n, &width))
        return NULL;
    PyObject *out = NULL;
    if ((width != 4 && width != 8) || first < 0 || n < 0 ||
        (first + n + 1) * (Py_ssize_t)width > offsets_view.len) {
        PyErr_SetString(PyExc_ValueError, "offsets do not hold the rows asked for");
        goto done;
    }
    out = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint64_t));
    if (out == NULL)
        goto done;
    uint64_t *hash = (uint64_t *)PyByteArray_AS_STRING(out);
    const unsigned char *data = (const unsigned char *)data_view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t start, end;
        if (width == 4) {
            start = ((const int32_t *)offsets_view.buf)[first + i];
            end = ((const int32_t *)offsets_view.buf)[first + i + 1];
        }
        else {
            start = ((const int64_t *)offsets_view.buf)[first + i];
            end = ((const int64_t *)offsets_view.buf)[first + i + 1];
        }
        if (start < 0 || end < start || end > data_view.len) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_ValueError, "an offset points past the data");
            goto done;
        }
        hash[i] = hash_bytes(data + start, end - start);
    }

done:
    PyBuffer_Release(&offsets_view);
    PyBuffer_Release(&data_view);
    return out;
}

/* repeats_within(keys, starts) -> bool: two equal keys within one group, the groups being
 * keys[starts[g]:starts[g + 1]] (uint64 hashes spread over all bits; starts int64, from 0 to
 * the number of keys, never decreasing). A table of slots sized to the widest group, stamped
 * with the group that filled it, so it is never cleared: one pass over the keys. */
static PyObject *
repeats_within(PyObject *self, PyObject *args)
{
    Py_buffer keys_view, starts_view;
    if (!PyArg_ParseTuple(args, "y*y*", &keys_view, &starts_view))
        return NULL;
    PyObject *out = NULL;
    const uint64_t *keys = (const uint64_t *)keys_view.buf;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    Py_ssize_t n_keys = keys_view.len / 8, n_groups = starts_view.len / 8 - 1;
    uint64_t *slot_key = NULL;
    int64_t *slot_group = NULL;
    int64_t widest = 0;
    if (n_groups < 0 || (n_groups == 0 && n_keys) ||
        (n_groups > 0 && (starts[0] != 0 || starts[n_groups] != n_keys))) {
        PyErr_SetString(PyExc_ValueError, "the groups do not cover the keys");
        goto done;
    }
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        if (starts[g + 1] < starts[g]) {
            PyErr_SetString(PyExc_ValueError, "the groups' starts decrease");
            goto done;
        }
        if (starts[g + 1] - starts[g] > widest)
            widest = starts[g + 1] - starts[g];
    }
    int bits = 4;
    while (((int64_t)1 << bits) < 2 * widest)
        bits++;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    slot_key = PyMem_Malloc(sizeof(uint64_t) << bits);
    slot_group = PyMem_Malloc(sizeof(int64_t) << bits);
    if (slot_key == NULL || slot_group == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memset(slot_group, 0xff, sizeof(int64_t) << bits); /* -1: no group yet */
    int found = 0;
    for (Py_ssize_t g = 0; g < n_groups && !found; g++) {
        for (int64_t i = starts[g]; i < starts[g + 1]; i++) {
            uint64_t key = keys[i], at = key >> (64 - bits);
            while (slot_group[at] == g && slot_key[at] != key)
                at = (at + 1) & mask;
            if (slot_group[at] == g) {
                found = 1;
                break;
            }
            slot_group[at] = g;
            slot_key[at] = key;
        }
    }
    out = PyBool_FromLong(found);

done:
    PyMem_Free(slot_key);
    PyMem_Free(slot_group);
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&starts_view);
    return out;
}

/* Eisel and Lemire's conversion of w * 10^q (w the exact decimal significand, not 0): the
 * product of w and a 128-bit truncation of 5^q (io/trec.py computes the table and hands it over
 * once, set_powers_of_five), which decides the correctly rounded double unless the product lies
 * too near a halfway point to tell, or the value is subnormal: 0 then, and the caller reads the
 * number the slow way. (Daniel Lemire, "Number Parsing at a Gigabyte per Second", 2021, sections
 * 5 and 6; it is how Rust's, Go's and fast_float's parsers read a double.) */
#define POW5_SMALLEST (-342)
#define POW5_LARGEST 308
static uint64_t pow5_high[POW5_LARGEST - POW5_SMALLEST + 1];
static uint64_t pow5_low[POW5_LARGEST - POW5_SMALLEST + 1];
static int pow5_ready = 0;

static PyObject *
set_powers_of_five(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    Py_ssize_t n = POW5_LARGEST - POW5_SMALLEST + 1;
    if (view.len != n * 16) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "expected 651 pairs of uint64 (high, low)");
        return NULL;
    }
    const uint64_t *pairs = view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        pow5_high[i] = pairs[2 * i];
        pow5_low[i] = pairs[2 * i + 1];
    }
    pow5_ready = 1;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static int
eisel_lemire(uint64_t w, int64_t q, double *out)
{
#ifdef __SIZEOF_INT128__
    if (!pow5_ready || w == 0 || q > POW5_LARGEST)
        return 0;
    if (q < POW5_SMALLEST) { /* below half the smallest subnormal even with 19 digits */
        *out = 0.0;
        return 1;
    }
    int lz = __builtin_clzll(w);
    w <<= lz;
    Py_ssize_t index = (Py_ssize_t)(q - POW5_SMALLEST);
    unsigned __int128 first = (unsigned __int128)w * pow5_high[index];
    uint64_t low = (uint64_t)first, high = (uint64_t)(first >> 64);
    const uint64_t mask = UINT64_MAX >> 55; /* 52 bits, the hidden one, one to round, one spare */
    if ((high & mask) == mask) { /* the bits below may carry into these: the next word */
        uint64_t second = (uint64_t)(((unsigned __int128)w * pow5_low[index]) >> 64);
        low += second;
        if (second > low)
            high++;
    }
    if (low == UINT64_MAX && (q < -27 || q > 55))
        return 0; /* the truncated table may be one too low here: cannot tell */
    int upper = (int)(high >> 63);
    uint64_t mantissa = high >> (upper + 64 - 52 - 3);
    int64_t power2 = ((q * (152170 + 65536)) >> 16) + 63 + upper - lz + 1023;
    if (power2 <= 0)
        return 0; /* subnormal */
    if (low <= 1 && q >= -4 && q <= 23 && (mantissa & 3) == 1 &&
        (mantissa << (upper + 64 - 52 - 3)) == high)
        mantissa &= ~(uint64_t)1; /* exactly halfway: to even */
    mantissa += mantissa & 1;
    mantissa >>= 1;
    if (mantissa >= ((uint64_t)2 << 52)) {
        mantissa = (uint64_t)1 << 52;
        power2++;
    }
    mantissa &= ~((uint64_t)1 << 52);
    if (power2 >= 0x7FF)
        return 0; /* past a double's range */
    uint64_t bits = mantissa | ((uint64_t)power2 << 52);
    memcpy(out, &bits, sizeof bits);
    return 1;
#else
    return 0;
#endif
}

/* The decimal number s[0:n] (`-`? digits (`.` digits)? ([eE] [+-]? digits)?, a digit at least
 * before the exponent) as a double in *out, rounded correctly; 0 when it is not one or not
 * finite. */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int
decimal_of(const unsigned char *s, Py_ssize_t n, double *out)
{
    const unsigned char *p = s, *end = s + n;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    uint64_t mantissa = 0;
    int significant = 0, digits = 0;
    int64_t scale = 0; /* the value is mantissa * 10^(scale + exponent) */
    for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
        if (significant < 19) {
            mantissa = mantissa * 10 + (*p - '0');
            significant += mantissa != 0;
        }
        else {
            significant = 20; /* more digits than a word holds: the slow way */
        }
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
            if (significant < 19) {
                mantissa = mantissa * 10 + (*p - '0');
                significant += mantissa != 0;
                scale--;
            }
            else {
                significant = 20;
            }
        }
    }
    if (!digits)
        return 0;
    int64_t exponent = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int exponent_negative = 0, exponent_digits = 0;
        p++;
        if (p < end && (*p == '-' || *p == '+')) {
            exponent_negative = *p == '-';
            p++;
        }
        for (; p < end && *p >= '0' && *p <= '9'; p++, exponent_digits++)
            if (exponent < 100000)
                exponent = exponent * 10 + (*p - '0');
        if (!exponent_digits)
            return 0;
        if (exponent_negative)
            exponent = -exponent;
    }
    if (p != end)
        return 0;
    int64_t power = scale + exponent;
    double value;
    if (significant <= 19 && mantissa == 0) {
        value = 0.0;
    }
    else if (significant <= 19 && mantissa <= ((uint64_t)1 << 53) && power >= -22 &&
             power <= 22) {
        /* both exact as doubles: one correctly rounded operation (Clinger's fast path) */
        value = power < 0 ? (double)mantissa / POW10[-power] : (double)mantissa * POW10[power];
    }
    else if (significant <= 19 && eisel_lemire(mantissa, power, &value)) {
        /* rounded correctly by the 128-bit product */
    }
    else {
        char small[80], *text = n < (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(n + 1);
        if (text == NULL)
            return 0;
        memcpy(text, s, n);
        text[n] = '\0';
        char *stop;
        value = PyOS_string_to_double(text, &stop, NULL); /* overflow: +-inf, refused below */
        int taken = stop == text + n && isfinite(value);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            taken = 0;
        }
        if (text != small)
            PyMem_Free(text);
        *out = value;
        return taken;
    }
    *out = negative ? -value : value;
    return 1;
}

/* A bytes object of n bytes to fill, or NULL with MemoryError. */
static PyObject *
new_bytes(Py_ssize_t n)
{
    return PyBytes_FromStringAndSize(NULL, n);
}

static PyObject *
parse_run_lines(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int final, delimiter;
    if (!PyArg_ParseTuple(args, "y*pi", &view, &final, &delimiter))
        return NULL;
    const unsigned char *data = view.buf, *end = data + view.len;
    /* a line has at least 12 bytes (six one-byte fields, five delimiters, "\n") */
    Py_ssize_t most = view.len / 12 + 1;
    PyObject *result = NULL, *qids = NULL, *q_out = NULL, *offsets_out = NULL, *docs_out = NULL,
             *hashes_out = NULL, *scores_out = NULL;
    if (view.len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a block of a run is at most 2 GiB");
        goto done;
    }
    qids = PyList_New(0);
    q_out = new_bytes(most * 4);
    offsets_out = new_bytes((most + 1) * 4);
    docs_out = new_bytes(view.len);
    hashes_out = new_bytes(most * 8);
    scores_out = new_bytes(most * 8);
    if (!qids || !q_out || !offsets_out || !docs_out || !hashes_out || !scores_out)
        goto done;
    int32_t *q = (int32_t *)PyBytes_AS_STRING(q_out);
    int32_t *offsets = (int32_t *)PyBytes_AS_STRING(offsets_out);
    unsigned char *docs = (unsigned char *)PyBytes_AS_STRING(docs_out);
    uint64_t *hashes = (uint64_t *)PyBytes_AS_STRING(hashes_out);
    double *scores = (double *)PyBytes_AS_STRING(scores_out);

    Py_ssize_t rows = 0, groups = 0, doc_bytes = 0;
    const unsigned char *query = NULL; /* the current query's id, in data */
    Py_ssize_t query_length = 0;
    Py_ssize_t group_line = 0, group_row = 0, group_docs = 0; /* where the current query began */
    offsets[0] = 0;
    const unsigned char *p = data;
    while (p < end) {
        const unsigned char *line = p, *field[7];
        int fields = 1;
        field[0] = p;
        for (; p < end; p++) {
            unsigned char c = *p;
            if (c > ' ' && c < 0x7f)
                continue;
            if (c == delimiter) {
                if (fields == 6)
                    goto not_plain; /* a seventh field */
                field[fields++] = p + 1;
            }
            else if (c == '\n') {
                break;
            }
            else {
                goto not_plain; /* a control character, a space in a tab-delimited file,
                                 * a byte past ASCII */
            }
        }
        const unsigned char *line_end = p;
        if (p < end)
            p++; /* past "\n" */
        else if (!final)
            goto not_plain; /* the caller cuts blocks at "\n" */
        if (line_end == line)
            continue; /* an empty line */
        if (fields != 6)
            goto not_plain;
        field[6] = line_end + 1;
        for (int f = 0; f < 6; f++)
            if (field[f + 1] - 1 == field[f])
                goto not_plain; /* an empty field */
        Py_ssize_t qid_length = field[1] - 1 - field[0];
        if (query == NULL || qid_length != query_length ||
            memcmp(query, field[0], qid_length) != 0) {
            PyObject *qid = PyUnicode_DecodeASCII((const char *)field[0], qid_length, NULL);
            if (qid == NULL || PyList_Append(qids, qid) < 0) {
                Py_XDECREF(qid);
                goto done;
            }
            Py_DECREF(qid);
            query = field[0];
            query_length = qid_length;
            group_line = line - data;
            group_row = rows;
            group_docs = doc_bytes;
            groups++;
        }
        Py_ssize_t doc_length = field[3] - 1 - field[2];
        if (!decimal_of(field[4], field[5] - 1 - field[4], &scores[rows]))
            goto not_plain;
        memcpy(docs + doc_bytes, field[2], doc_length);
        hashes[rows] = hash_bytes(field[2], doc_length);
        doc_bytes += doc_length;
        q[rows] = (int32_t)(groups - 1);
        offsets[++rows] = (int32_t)doc_bytes;
    }
    Py_ssize_t consumed = view.len;
    if (!final && groups) { /* the last query may go on in the next block */
        if (PyList_SetSlice(qids, groups - 1, groups, NULL) < 0)
            goto done;
        consumed = group_line;
        rows = group_row;
        doc_bytes = group_docs;
    }
    if (_PyBytes_Resize(&q_out, rows * 4) < 0 || _PyBytes_Resize(&offsets_out, (rows + 1) * 4) < 0 ||
        _PyBytes_Resize(&docs_out, doc_bytes) < 0 || _PyBytes_Resize(&hashes_out, rows * 8) < 0 ||
        _PyBytes_Resize(&scores_out, rows * 8) < 0)
        goto done;
    result = Py_BuildValue("nOOOOOO", consumed, qids, q_out, offsets_out, docs_out, hashes_out,
                           scores_out);
    goto done;

not_plain:
    result = Py_NewRef(Py_None);

done:
    Py_XDECREF(qids);
    Py_XDECREF(q_out);
    Py_XDECREF(offsets_out);
    Py_XDECREF(docs_out);
    Py_XDECREF(hashes_out);
    Py_XDECREF(scores_out);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_dict_run", scan_dict_run, METH_VARARGS,
     "scan_dict_run(run, index, docs, starts) -> (scores, run_starts, where, judged_score) or None"},
    {"string_hashes", string_hashes, METH_VARARGS,
     "string_hashes(offsets, data, first, n, width) -> n uint64 hashes"},
    {"repeats_within", repeats_within, METH_VARARGS,
     "repeats_within(keys, starts) -> two equal uint64 keys within one group"},
    {"set_powers_of_five", set_powers_of_five, METH_VARARGS,
     "set_powers_of_five(pairs) -> None: the 128-bit powers of five parse_run_lines reads with"},
    {"parse_run_lines", parse_run_lines, METH_VARARGS,
     "parse_run_lines(data, final, delimiter) -> (consumed, qids, q, offsets, docs, hashes, "
     "scores) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "searcheval's compiled parts (searcheval/_native.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModule_Create(&module);
}
