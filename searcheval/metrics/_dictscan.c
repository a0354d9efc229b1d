/* One pass in C over a run given as `{query: {doc: score}}`, for the dict path at scale
 * (`searcheval.metrics.dicts`).
 *
 * Python can only read such a run a pass at a time (checking the ids' types, the scores' types,
 * reading the scores), each pass about as long as iterating the dicts at all; then it looks every
 * judged document up in its query's ranking. Here all of it is one walk over the dicts: every id
 * and score is checked and read once, and the judged documents are looked up while their query's
 * ranking is at hand.
 *
 *     scan(run, index, docs, starts) -> (scores, run_starts, where, judged_score) or None
 *
 * run:    the run as the user gave it.
 * index:  {query: c}, the judged queries' positions (`dicts.DictQrels.index`).
 * docs:   every judged document, query by query (`DictQrels.docs`); query c's are
 *         docs[starts[c]:starts[c + 1]].
 * starts: int64 buffer of len(index) + 1.
 *
 * Returns four writable buffers (read with numpy.frombuffer):
 *   scores        float64, every score of the run in its order;
 *   run_starts    int64 (len(run) + 1,), where each of the run's queries starts in `scores`;
 *   where         int64 (len(index),), each judged query's position in the run, -1: absent;
 *   judged_score  float64, one per judged document: its score in its query's ranking, NaN: not
 *                 retrieved.
 * or None when the run is not in the shape the dict engine takes as it is (a query id or a
 * document id that is not exactly a str or is empty, a ranking that is not a dict, a score that is
 * not an int or a float -- bool refused -- or not finite): the caller then takes the dict engine,
 * which converts or refuses with its clear error, so both paths give the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

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
scan(PyObject *self, PyObject *args)
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

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(run, index, docs, starts) -> (scores, run_starts, where, judged_score) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dictscan",
    "One pass in C over a {query: {doc: score}} run (searcheval.metrics.dicts).", -1, methods,
};

PyMODINIT_FUNC
PyInit__dictscan(void)
{
    return PyModule_Create(&module);
}
