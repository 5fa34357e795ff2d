// FloatBuffer: the array a tensor's values and gradient live in. A std::vector<float> over the
// tensor allocator: 64-byte aligned blocks that a training step reuses instead of asking the
// operating system again, and new elements left uninitialized (resize(n) does not zero them;
// code that needs zeros asks: assign(n, 0.0f)). The why is in autograd/kernels/allocator.h; a
// reader of autograd/tensor.h can take FloatBuffer as "a vector of floats".
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace autograd::kernels {

void* tensor_alloc(std::size_t bytes);    // 64-byte aligned; throws std::bad_alloc
void tensor_free(void* p) noexcept;       // p from tensor_alloc (or nullptr)

// std::allocator interface over tensor_alloc, for std::vector.
template <typename T>
struct TensorAllocator {
    using value_type = T;
    TensorAllocator() = default;
    template <typename U>
    TensorAllocator(const TensorAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(tensor_alloc(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t) noexcept { tensor_free(p); }

    // default-initialize: `new (p) U` leaves a float uninitialized, where std::allocator's
    // `new (p) U()` would zero it
    template <typename U>
    void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) { ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...); }

    template <typename U>
    bool operator==(const TensorAllocator<U>&) const noexcept { return true; }
};

using FloatBuffer = std::vector<float, TensorAllocator<float>>;

}  // namespace autograd::kernels
