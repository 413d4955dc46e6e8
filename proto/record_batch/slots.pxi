# Building instances of slotted Python classes from compiled code without calling them: the
# codec's Record (a frozen dataclass) and the consumer's ConsumerRecord (a NamedTuple). Calling
# their constructors costs more than decoding a record; this allocates the instance with its
# type's own allocator and stores each field where the type's slot descriptor says it lives.
# `slot_offsets` checks, once at import, that each name is a plain object slot of the type.
#
# `untrack` takes a finished instance out of the garbage collector's lists, as CPython does
# for a tuple of atomic values: a record holds ints, bytes, str, None and tuples of those
# (and its header objects), so no reference cycle can run through it. A consumer keeps hundreds
# of thousands of records buffered, and the collector walking them all again and again cost
# 0.3 us a record consumed, more than decoding it.

from cpython.ref cimport PyObject

cdef extern from *:
    """
    #include <structmember.h>
    static PyObject* pykraft_new_instance(PyObject* type, Py_ssize_t items) {
        PyTypeObject* t = (PyTypeObject*)type;
        return t->tp_alloc(t, items);
    }
    static void pykraft_set_slot(PyObject* obj, Py_ssize_t offset, PyObject* value) {
        PyObject** slot = (PyObject**)((char*)obj + offset);
        PyObject* old = *slot;
        Py_INCREF(value);
        *slot = value;
        Py_XDECREF(old);
    }
    static PyObject* pykraft_get_slot(PyObject* obj, Py_ssize_t offset) {
        return *(PyObject**)((char*)obj + offset);
    }
    static void pykraft_set_item(PyObject* tuple, Py_ssize_t index, PyObject* value) {
        Py_INCREF(value);
        PyTuple_SET_ITEM(tuple, index, value);
    }
    static void pykraft_untrack(PyObject* obj) {
        if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    }
    static Py_ssize_t pykraft_slot_offset(PyObject* descr) {
        if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) return -1;
        PyMemberDef* member = ((PyMemberDescrObject*)descr)->d_member;
        return member->type == T_OBJECT_EX && !(member->flags & READONLY) ? member->offset : -1;
    }
    """
    object pykraft_new_instance(object type, Py_ssize_t items)
    void pykraft_set_slot(object obj, Py_ssize_t offset, object value)
    PyObject* pykraft_get_slot(object obj, Py_ssize_t offset)
    void pykraft_set_item(object tuple, Py_ssize_t index, object value)
    Py_ssize_t pykraft_slot_offset(object descr)
    void pykraft_untrack(object obj)


cdef inline object new_instance(type cls, Py_ssize_t items=0):
    """An instance of `cls` (with `items` tuple items) with every slot and item empty: fill each
    one before anyone sees it."""
    return pykraft_new_instance(cls, items)


cdef inline void untrack(object obj):
    """Once every slot or item is filled: no cycle can pass through `obj` (see above)."""
    pykraft_untrack(obj)


cdef inline object get_slot(object obj, Py_ssize_t offset):
    return <object>pykraft_get_slot(obj, offset)


cdef inline void set_item(object tuple_, Py_ssize_t index, object value):
    pykraft_set_item(tuple_, index, value)


cdef inline void set_slot(object obj, Py_ssize_t offset, object value):
    pykraft_set_slot(obj, offset, value)


cdef int slot_offsets(type cls, tuple names, Py_ssize_t* out) except -1:
    cdef Py_ssize_t offset
    for index, name in enumerate(names):
        offset = pykraft_slot_offset(cls.__dict__[name])
        if offset < 0:
            raise TypeError(f"{cls.__name__}.{name} is not a writable object slot")
        out[index] = offset
    return 0
